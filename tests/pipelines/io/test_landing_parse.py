"""How landed lines become typed rows (`pipelines/io/landing_parse.py`), on lines built in memory.

- `clean_lines`: blank lines dropped, BOM and one trailing CR removed, invalid UTF-8 flagged and replaced.
- `file_name`: the decoded file name of a `_metadata.file_path` URI ('+' kept as is).
- `json_line_shape`: exactly one JSON object (as Spark's key listing parses it), and whether a key is undeclared.
- `parse_json_lines`: fields by name (case-sensitive), a line that is not an object or has a value that does not
  convert is one corrupt record holding the line, undeclared fields and failed values in `_rescued_data`.
- `parse_csv_lines`: cells by each file's header, header lines dropped, corrupt and rescued likewise, a file
  without a known layout left for the writer to refuse.
- `read_csv_headers`: one layout per distinct header, header problems named per file.
- `unknown_fields`, `rescued_value`, `without_rescued`, `with_corrupt`, `read_schema`.

The text lines are what Spark's text reader gives (`value` and `_metadata`); no files are read by Spark.
"""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, IntegerType, StringType, StructField, StructType, TimestampType

from infra.errors import ConfigError
from pipelines.io.landing_parse import (
    CORRUPT_COLUMN,
    LANDED_LINEAGE,
    RESCUED_COLUMN,
    CsvHeaders,
    clean_lines,
    file_name,
    parse_csv_lines,
    parse_json_lines,
    read_csv_headers,
    read_schema,
    rescued_value,
    unknown_fields,
    utf8_text,
    with_corrupt,
    without_rescued,
)
from pipelines.io.landing_values import DECLARED_KEYS, NOT_ONE_OBJECT, UNDECLARED_KEY, json_line_shape, rounded
from pipelines.spec.sources import FileSource

SCHEMA = StructType(
    [StructField("id", StringType()), StructField("qty", IntegerType()), StructField("ts", TimestampType())]
)
JSON_SOURCE = FileSource("things", "json", SCHEMA)
CSV_SOURCE = FileSource("things", "csv", SCHEMA)


def _lines(spark: SparkSession, lines: list[str], file: str = "a.json") -> DataFrame:
    """Text lines as Spark's text reader gives them: `value` and `_metadata.file_path`."""
    df = spark.createDataFrame([(line,) for line in lines], "value string")
    return df.withColumn("_metadata", F.struct(F.lit(f"file:///landing/things/{file}").alias("file_path")))


def _file_lines(spark: SparkSession, rows: list[tuple[str, str]]) -> DataFrame:
    """(file name, line) pairs as text lines of several files."""
    df = spark.createDataFrame(rows, "file string, value string")
    path = F.concat(F.lit("file:///landing/things/"), F.col("file"))
    return df.select("value", F.struct(path.alias("file_path")).alias("_metadata"))


def _invalid_utf8(spark: SparkSession, data: bytes) -> DataFrame:
    """One line whose landed bytes are not UTF-8 (a binary cast to string keeps the bytes, as the reader does)."""
    df = spark.createDataFrame([(bytearray(data),)], "b binary").select(F.col("b").cast("string").alias("value"))
    return df.withColumn("_metadata", F.struct(F.lit("file:///landing/things/a.json").alias("file_path")))


def _rows(df: DataFrame) -> list[tuple]:
    """Rows in order, without `_metadata`, timestamps as UTC text."""
    columns = [
        F.col(f.name).cast("string").alias(f.name) if isinstance(f.dataType, TimestampType) else F.col(f.name)
        for f in df.schema.fields
        if f.name != "_metadata"
    ]
    return [tuple(r) for r in df.select(*columns).collect()]


# --- clean_lines / file_name -------------------------------------------------------------------------------


def test_clean_lines_drops_blank_lines_and_strips_bom_and_one_trailing_cr(spark: SparkSession) -> None:
    # A line that is only the leading BOM (and white space) is blank; a second BOM is text.
    lines = [
        "\ufeff{a}",
        "b\r",
        "",
        "   ",
        "\t",
        "\r",
        "c\r\r",
        "  d \ufeff",
        "e\rf",
        "\ufeff",
        "\ufeff \r",
        "\ufeff\ufeff",
        "\x0b\f \t",
        "\u00a0",  # a no-break space is text, as it is to a regular expression's \S
    ]
    out = clean_lines(_lines(spark, lines))
    assert out.columns == ["_line", "_utf8", "_metadata"]
    assert _rows(out) == [
        ("{a}", True),
        ("b", True),
        ("c\r", True),
        ("  d \ufeff", True),
        ("e\rf", True),
        ("\ufeff", True),
        ("\u00a0", True),
    ]


def test_clean_lines_flags_invalid_utf8_and_replaces_the_bad_byte(spark: SparkSession) -> None:
    assert _rows(clean_lines(_invalid_utf8(spark, b"Jos\xe9"))) == [("Jos\ufffd", False)]


@pytest.mark.parametrize(
    ("data", "text", "utf8"),
    [
        (b"Jos\xe9 \xff\xfe!", "Jos\ufffd \ufffd\ufffd!", False),  # every invalid byte replaced, the rest kept
        (b"\xc3", "\ufffd", False),  # a sequence cut short at the end
        # an encoded surrogate is not UTF-8: one replacement per maximal invalid subpart, as Unicode recommends
        (b"\xed\xa0\x80", "\ufffd\ufffd\ufffd", False),
        ("é€😀".encode(), "é€😀", True),
        (b"", "", True),
    ],
)
def test_utf8_text_replaces_invalid_bytes_and_equals_the_value_only_when_valid(
    spark: SparkSession, data: bytes, text: str, utf8: bool
) -> None:
    """The check every landed line and Kafka raw value goes through (`utf8_text`)."""
    value = _invalid_utf8(spark, data).select("value")
    row = value.select(utf8_text(F.col("value")).alias("t"), (utf8_text(F.col("value")) == F.col("value")).alias("u"))
    assert tuple(row.first()) == (text, utf8)


def test_clean_lines_appends_extra_columns_computed_from_the_metadata(spark: SparkSession) -> None:
    out = clean_lines(_lines(spark, ["x"], file="b.json"), file_name(F.col("_metadata.file_path")).alias("f"))
    assert out.columns == ["_line", "_utf8", "_metadata", "f"]
    assert _rows(out) == [("x", True, "b.json")]


@pytest.mark.parametrize(
    ("uri", "name"),
    [
        ("file:///landing/events/a.json", "a.json"),
        ("file:///landing/events/2026%2001%2001.json", "2026 01 01.json"),
        ("file:///landing/events/a+b.json", "a+b.json"),
        ("file:///landing/events/caf%C3%A9.csv.gz", "caf\u00e9.csv.gz"),
        ("a.json", "a.json"),
    ],
)
def test_file_name_is_the_decoded_last_path_part(spark: SparkSession, uri: str, name: str) -> None:
    df = spark.createDataFrame([(uri,)], "p string")
    assert df.select(file_name(F.col("p"))).first()[0] == name


# --- JSON --------------------------------------------------------------------------------------------------


def test_json_fields_are_matched_by_name_in_any_order(spark: SparkSession) -> None:
    lines = [
        '{"id": "a", "qty": 1, "ts": "2026-01-01T10:00:00Z"}',
        '{"ts": "2026-01-02T00:00:00Z", "qty": 2, "id": "b"}',
    ]
    out = parse_json_lines(_lines(spark, lines), JSON_SOURCE)
    assert out.columns == ["id", "qty", "ts", CORRUPT_COLUMN, RESCUED_COLUMN, "_metadata"]
    assert _rows(out) == [
        ("a", 1, "2026-01-01 10:00:00", None, None),
        ("b", 2, "2026-01-02 00:00:00", None, None),
    ]


def test_json_missing_fields_are_null_and_not_corrupt(spark: SparkSession) -> None:
    lines = ['{"id": "a"}', "{}", '{"id": null, "qty": null}']
    assert _rows(parse_json_lines(_lines(spark, lines), JSON_SOURCE)) == [
        ("a", None, None, None, None),
        (None, None, None, None, None),
        (None, None, None, None, None),
    ]


def test_json_lines_that_are_not_objects_are_corrupt_records(spark: SparkSession) -> None:
    lines = ["not json", "[1, 2]", '{"id": "a"', "   ", '"text"']
    assert _rows(parse_json_lines(_lines(spark, lines), JSON_SOURCE)) == [
        (None, None, None, "not json", None),
        (None, None, None, "[1, 2]", None),
        (None, None, None, '{"id": "a"', None),
        (None, None, None, '"text"', None),
    ]


def test_json_value_that_does_not_convert_is_corrupt_and_rescued_with_its_text(spark: SparkSession) -> None:
    lines = ['{"id": "d", "qty": "many"}', '{"id": "g", "qty": 517.0}', '{"id": "h", "ts": "yesterday"}']
    assert _rows(parse_json_lines(_lines(spark, lines), JSON_SOURCE)) == [
        ("d", None, None, lines[0], '{"qty":"many"}'),
        ("g", None, None, lines[1], '{"qty":"517.0"}'),
        ("h", None, None, lines[2], '{"ts":"yesterday"}'),
    ]


def test_json_undeclared_fields_are_rescued_names_are_case_sensitive(spark: SparkSession) -> None:
    lines = ['{"id": "c", "qty": 3, "coupon": "X"}', '{"ID": "e"}', '{"id": "f", "meta": {"a": [1, 2]}}']
    assert _rows(parse_json_lines(_lines(spark, lines), JSON_SOURCE)) == [
        ("c", 3, None, None, '{"coupon":"X"}'),
        (None, None, None, None, '{"ID":"e"}'),
        ("f", None, None, None, '{"meta":"{\\"a\\":[1,2]}"}'),  # a nested value is kept as its JSON text
    ]


def test_json_line_with_bom_and_crlf_parses(spark: SparkSession) -> None:
    assert _rows(parse_json_lines(_lines(spark, ['\ufeff{"id": "b", "qty": 7}\r']), JSON_SOURCE)) == [
        ("b", 7, None, None, None)
    ]


def test_json_invalid_utf8_line_is_corrupt_with_a_replacement_character(spark: SparkSession) -> None:
    out = parse_json_lines(_invalid_utf8(spark, b'{"id": "Jos\xe9"}'), JSON_SOURCE)
    assert _rows(out) == [(None, None, None, '{"id": "Jos\ufffd"}', None)]


MONEY = StructType([StructField("id", StringType()), StructField("amount", DecimalType(12, 2))])
MONEY_JSON = FileSource("things", "json", MONEY)
MONEY_CSV = FileSource("things", "csv", MONEY)


@pytest.mark.parametrize(
    "line",
    [
        '{"id": "a"}{"id": "b"}',
        '{"id": "a"} {"id": "b"}',
        '{"id": "a"},{"id": "b"}',
        '{"id": "a"}, "qty": 2',
        '{"id": "a"}}',
        '{"id": "a"}]',
        '{"id": "a"} 5',
        '{"id": "a"} "b"',
        '{"id": "a"} {',
        # Its only `}` is its last character (the parse's shortcut), yet it is not one object.
        '[{"id": "a"}',
        '{"id": "a" "b"}',
    ],
)
def test_json_line_with_anything_after_its_object_is_one_corrupt_record(spark: SparkSession, line: str) -> None:
    # Spark's parser stops after the first object: the rest would vanish without a trace.
    assert _rows(parse_json_lines(_lines(spark, [line]), JSON_SOURCE)) == [(None, None, None, line, None)]


def test_json_single_quotes_are_corrupt_unless_the_source_allows_them(spark: SparkSession) -> None:
    line = "{'id': 'a', 'qty': 1}"  # not JSON, though Spark's parser reads it by default
    strict = _rows(parse_json_lines(_lines(spark, [line]), JSON_SOURCE))
    assert [r[:4] for r in strict] == [(None, None, None, line)]
    allowed = FileSource("things", "json", SCHEMA, options=(("allowSingleQuotes", "true"),))
    assert _rows(parse_json_lines(_lines(spark, [line]), allowed)) == [("a", 1, None, None, None)]


@pytest.mark.parametrize(
    ("line", "names", "shape"),
    [
        ('{"a": 1}', ["a"], DECLARED_KEYS),
        ('  {"a": 1, "a": 2}\t ', ["a"], DECLARED_KEYS),
        ("{}", [], DECLARED_KEYS),
        ('{"a": {"b": [1, {"c": "}]"}]}}', ["a"], DECLARED_KEYS),  # nested keys are values, not columns
        ("{'a': 'x'}", ["a"], DECLARED_KEYS),  # single quotes and raw tabs: as Spark's key listing accepts
        ('{"a": "x\ty"}', ["a"], DECLARED_KEYS),
        ('{"a,b": 1, "q\\"": 2}', ["a,b", 'q"'], DECLARED_KEYS),  # names are passed as JSON, not split
        ('{"a": 1, "b": 2}', ["a"], UNDECLARED_KEY),
        ('{"A": 1}', ["a"], UNDECLARED_KEY),
        ('{"a": 1}', [], UNDECLARED_KEY),
        ('{"a": 1} x', ["a"], NOT_ONE_OBJECT),
        ('{"b": 1}]', ["a"], NOT_ONE_OBJECT),  # an undeclared key does not stop the test of what follows
        ('{"a": 1,}', ["a"], NOT_ONE_OBJECT),
        ('{"a": NaN}', ["a"], NOT_ONE_OBJECT),
        ('{"a": 1 /* c */}', ["a"], NOT_ONE_OBJECT),
        ('{"a": "\\q"}', ["a"], NOT_ONE_OBJECT),
        ("[1]", ["a"], NOT_ONE_OBJECT),
        ("null", ["a"], NOT_ONE_OBJECT),
        ("", ["a"], NOT_ONE_OBJECT),
        (None, ["a"], None),
    ],
)
def test_json_line_shape_is_one_object_and_whether_a_key_is_undeclared(
    spark: SparkSession, line: str | None, names: list[str], shape: int | None
) -> None:
    df = spark.createDataFrame([(line,)], "line string")
    assert df.select(json_line_shape(F.col("line"), names)).first()[0] == shape


def test_json_object_with_brackets_and_braces_inside_values_is_one_record(spark: SparkSession) -> None:
    lines = ['{"id": "}{]["}', '  {"id": "n", "meta": [1, {"a": [2]}]}  ']
    assert _rows(parse_json_lines(_lines(spark, lines), JSON_SOURCE)) == [
        ("}{][", None, None, None, None),
        ("n", None, None, None, '{"meta":"[1,{\\"a\\":[2]}]"}'),
    ]


def test_json_lone_surrogate_escape_is_corrupt_and_a_pair_is_kept(spark: SparkSession) -> None:
    lines = ['{"id": "\\ud800"}', '{"id": "x\\udc00"}', '{"id": "\\ud83d\\ude00"}', '{"id": "\\\\ud800"}']
    assert _rows(parse_json_lines(_lines(spark, lines), JSON_SOURCE)) == [
        (None, None, None, lines[0], None),
        (None, None, None, lines[1], None),
        ("\U0001f600", None, None, None, None),
        ("\\ud800", None, None, None, None),  # an escaped backslash, then the text "ud800"
    ]


def test_json_decimal_with_more_digits_than_its_scale_is_rescued_not_rounded(spark: SparkSession) -> None:
    lines = [
        '{"id": "a", "amount": 0.1234567890123456789}',
        '{"id": "b", "amount": 10.555}',
        '{"id": "c", "amount": "10.555"}',
        '{"id": "d", "amount": 10.550}',
        '{"id": "e", "amount": 1.5e1}',
        '{"id": "f", "amount": 12345678901.5}',
        '{"id": "g", "amount": 9999999999.999}',
    ]
    rows = [tuple(r) for r in parse_json_lines(_lines(spark, lines), MONEY_JSON).drop("_metadata").collect()]
    # Too many integer digits: rescued with the number as the JSON parser reads it (through a double).
    assert rows[5][:3] == ("f", None, lines[5]) and Decimal(json.loads(rows[5][3])["amount"]) == Decimal(
        "12345678901.5"
    )
    assert rows[:5] + rows[6:] == [
        ("a", None, lines[0], '{"amount":"0.1234567890123456789"}'),
        ("b", None, lines[1], '{"amount":"10.555"}'),
        ("c", None, lines[2], '{"amount":"10.555"}'),
        ("d", Decimal("10.55"), None, None),
        ("e", Decimal("15.00"), None, None),
        ("g", None, lines[6], '{"amount":"9999999999.999"}'),  # rounding would overflow
    ]


def test_rounded_columns_round_to_their_scale(spark: SparkSession) -> None:
    source = FileSource("things", "json", rounded(MONEY, "amount"))
    lines = ['{"id": "b", "amount": 10.555}', '{"id": "h", "amount": 10.554}']
    assert [tuple(r) for r in parse_json_lines(_lines(spark, lines), source).drop("_metadata").collect()] == [
        ("b", Decimal("10.56"), None, None),
        ("h", Decimal("10.55"), None, None),
    ]
    with pytest.raises(ConfigError, match=r"round=\['id'\] names no decimal column; decimal columns: amount"):
        rounded(MONEY, "id")


def test_csv_decimal_with_more_digits_than_its_scale_is_rescued_not_rounded(spark: SparkSession) -> None:
    headers = CsvHeaders((("id", "amount"),), ("id,amount",), {"a.csv": 0})
    rows = [("a.csv", "a,10.555"), ("a.csv", "b,10.50"), ("a.csv", "c,0.1234567890123456789")]
    out = parse_csv_lines(_file_lines(spark, rows), MONEY_CSV, headers).drop("_metadata", "_layout")
    assert [tuple(r) for r in out.collect()] == [
        ("a", None, "a,10.555", '{"amount":"10.555"}'),
        ("b", Decimal("10.50"), None, None),
        ("c", None, "c,0.1234567890123456789", '{"amount":"0.1234567890123456789"}'),
    ]


# --- CSV ---------------------------------------------------------------------------------------------------

HEADERS = CsvHeaders(
    layouts=(("id", "qty", "ts"), ("qty", "id", "ts", "coupon")),
    header_lines=("id,qty,ts", "qty,id,ts,coupon"),
    by_file={"a.csv": 0, "b.csv": 1, "d.csv": 1},
)


def test_csv_cells_are_matched_by_each_files_header(spark: SparkSession) -> None:
    rows = [
        ("a.csv", "id,qty,ts"),
        ("a.csv", "a1,1,2026-01-01 10:00:00"),
        ("b.csv", "qty,id,ts,coupon"),
        ("b.csv", "2,b1,2026-01-01 11:00:00,SAVE5"),
        ("a.csv", '"a,5",5,2026-01-01 10:00:00'),
    ]
    out = parse_csv_lines(_file_lines(spark, rows), CSV_SOURCE, HEADERS)
    assert out.columns == ["id", "qty", "ts", CORRUPT_COLUMN, RESCUED_COLUMN, "_layout", "_metadata"]
    assert _rows(out) == [
        ("a1", 1, "2026-01-01 10:00:00", None, None, 0),
        ("b1", 2, "2026-01-01 11:00:00", None, '{"coupon":"SAVE5"}', 1),
        ("a,5", 5, "2026-01-01 10:00:00", None, None, 0),
    ]


def test_csv_header_with_bom_and_crlf_is_dropped_and_values_are_clean(spark: SparkSession) -> None:
    rows = [("d.csv", "\ufeffqty,id,ts,coupon\r"), ("d.csv", "3,d1,2026-01-01 12:00:00,S\r")]
    assert _rows(parse_csv_lines(_file_lines(spark, rows), CSV_SOURCE, HEADERS)) == [
        ("d1", 3, "2026-01-01 12:00:00", None, '{"coupon":"S"}', 1)
    ]


def test_csv_cell_that_does_not_convert_is_corrupt_and_rescued(spark: SparkSession) -> None:
    rows = [("a.csv", "a2,x,2026-01-01 10:00:00"), ("a.csv", "a3,3,soon")]
    assert _rows(parse_csv_lines(_file_lines(spark, rows), CSV_SOURCE, HEADERS)) == [
        ("a2", None, "2026-01-01 10:00:00", "a2,x,2026-01-01 10:00:00", '{"qty":"x"}', 0),
        ("a3", 3, None, "a3,3,soon", '{"ts":"soon"}', 0),
    ]


def test_csv_line_with_the_wrong_cell_count_is_corrupt(spark: SparkSession) -> None:
    rows = [("a.csv", "a3,3"), ("a.csv", "a4,4,2026-01-01 10:00:00,extra")]
    out = parse_csv_lines(_file_lines(spark, rows), CSV_SOURCE, HEADERS)
    assert [(r[0], r[3], r[4]) for r in _rows(out)] == [
        ("a3", "a3,3", None),
        ("a4", "a4,4,2026-01-01 10:00:00,extra", None),
    ]


def test_csv_file_without_a_known_layout_has_a_null_layout(spark: SparkSession) -> None:
    rows = [("c.csv", "c1,1,2026-01-01 10:00:00")]
    assert _rows(parse_csv_lines(_file_lines(spark, rows), CSV_SOURCE, HEADERS)) == [
        (None, None, None, None, None, None)
    ]


def test_csv_invalid_utf8_line_is_corrupt_and_not_rescued(spark: SparkSession) -> None:
    df = spark.createDataFrame([(bytearray(b"Jos\xe9,1,2026-01-01 10:00:00"),)], "b binary")
    df = df.select(
        F.col("b").cast("string").alias("value"),
        F.struct(F.lit("file:///landing/things/a.csv").alias("file_path")).alias("_metadata"),
    )
    assert _rows(parse_csv_lines(df, CSV_SOURCE, HEADERS)) == [
        ("Jos\ufffd", 1, "2026-01-01 10:00:00", "Jos\ufffd,1,2026-01-01 10:00:00", None, 0)
    ]


# --- read_csv_headers --------------------------------------------------------------------------------------


def _land(folder: Path, files: dict[str, bytes]) -> list[Path]:
    paths = []
    for name, data in files.items():
        path = folder / name
        path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
        paths.append(path)
    return paths


def test_read_csv_headers_gives_one_layout_per_distinct_header(tmp_path: Path) -> None:
    paths = _land(
        tmp_path,
        {
            "1.csv": b"id,qty,ts\na,1,2026-01-01\n",
            "2.csv": b"id,qty,ts\nb,2,2026-01-01\n",
            "3.csv": b"\xef\xbb\xbfTS,Qty,ID,coupon\r\nx,1,c\r\n",
            "4.csv.gz": b",id,qty,ts\n0,d,1,2026-01-01\n",
            "5.csv": b"",
        },
    )
    headers = read_csv_headers(CSV_SOURCE, paths)
    assert headers.layouts == (("id", "qty", "ts"), ("ts", "qty", "id", "coupon"), ("_c0", "id", "qty", "ts"))
    assert headers.header_lines == ("id,qty,ts", "TS,Qty,ID,coupon", ",id,qty,ts")
    assert headers.by_file == {"1.csv": 0, "2.csv": 0, "3.csv": 1, "4.csv.gz": 2}
    assert headers.problems == {}


def test_read_csv_headers_names_each_unusable_header(tmp_path: Path) -> None:
    paths = _land(
        tmp_path,
        {
            "missing.csv": b"id,ts\na,2026-01-01\n",
            "twice.csv": b"id,qty,ts,ID\na,1,2026-01-01,b\n",
            "latin1.csv": b"id,qty,ts,caf\xe9\n",
        },
    )
    headers = read_csv_headers(CSV_SOURCE, paths)
    assert headers.problems == {
        "missing.csv": "its header lacks column(s) qty (header: id, ts)",
        "twice.csv": "its header names column(s) id more than once",
        "latin1.csv": "its header line is not UTF-8",
    }
    assert headers.by_file == {"missing.csv": 0, "twice.csv": 1}


def test_read_csv_headers_continues_from_known_headers(tmp_path: Path) -> None:
    first = read_csv_headers(CSV_SOURCE, _land(tmp_path, {"1.csv": b"id,qty,ts\n"}))
    later = _land(tmp_path, {"2.csv": b"qty,id,ts\n", "3.csv": b"id,qty,ts\n"})
    headers = read_csv_headers(CSV_SOURCE, [tmp_path / "1.csv", *later], known=first)
    assert headers.layouts == (("id", "qty", "ts"), ("qty", "id", "ts"))
    assert headers.by_file == {"1.csv": 0, "2.csv": 1, "3.csv": 0}


def test_read_csv_headers_uses_the_sources_separator(tmp_path: Path) -> None:
    source = FileSource("things", "csv", SCHEMA, options=(("sep", ";"),))
    headers = read_csv_headers(source, _land(tmp_path, {"1.csv": b"qty;id;ts\n"}))
    assert headers.layouts == (("qty", "id", "ts"),)


# --- rescued data helpers and schemas ---------------------------------------------------------------------


def test_rescued_data_helpers(spark: SparkSession) -> None:
    rows = [(1, '{"qty":"x","coupon":"S","ID":"e"}'), (2, '{"qty":"x"}'), (3, None)]
    df = spark.createDataFrame(rows, f"n int, {RESCUED_COLUMN} string")
    out = df.select(
        "n",
        unknown_fields(SCHEMA).alias("unknown"),
        rescued_value("coupon").alias("coupon"),
        without_rescued(["coupon", "ID"]).alias("rest"),
        without_rescued(["qty"]).alias("without_qty"),
    )
    assert [tuple(r) for r in out.orderBy("n").collect()] == [
        (1, ["coupon", "ID"], "S", '{"qty":"x"}', '{"coupon":"S","ID":"e"}'),
        (2, [], None, '{"qty":"x"}', None),
        (3, [], None, None, None),
    ]


def test_parsed_schemas_add_the_corrupt_and_rescued_columns() -> None:
    assert with_corrupt(SCHEMA).names == ["id", "qty", "ts", CORRUPT_COLUMN]
    assert read_schema(JSON_SOURCE).names == ["id", "qty", "ts", CORRUPT_COLUMN, RESCUED_COLUMN]
    assert [f.name for f in LANDED_LINEAGE] == [
        "_corrupt_record",
        "_rescued_data",
        "_file_rejected",
        "_source_file",
        "_ingested_at",
    ]
