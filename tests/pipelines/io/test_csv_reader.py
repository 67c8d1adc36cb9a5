"""Landed CSV files read by Spark's CSV reader (`pipelines/io/csv_reader.py`) give exactly the line parse's rows.

- `reads_alike`: the byte scan that sends a file to the line parse (not UTF-8, a BOM or control character after
  the start, a repeated or missing header, compressed).
- `read_batch_by_reader`: on messy files (quotes, separators in quotes, wrong cell counts, values that do not
  convert, an undeclared column, empty cells, CRLF and lone CR line ends, blank lines, non-ASCII text, two
  layouts) the rows equal the line parse's, value for value; a file the scan refuses is taken from the line
  parse; a decimal with more digits than its scale marks its row for a second parse.
"""

from __future__ import annotations

import gzip
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DateType,
    DecimalType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pipelines.io.csv_reader import REPARSE_MARK, reader_applies, reads_alike
from pipelines.io.landing_parse import CORRUPT_COLUMN, parse_csv_lines, read_csv_headers
from pipelines.io.sources import read_batch_by_reader
from pipelines.spec.sources import FileSource
from tests.support.helpers import land_files

# The ingestion time the batches read here are stamped with.
AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

SCHEMA = StructType(
    [
        StructField("id", StringType()),
        StructField("qty", IntegerType()),
        StructField("price", DecimalType(8, 2)),
        StructField("day", DateType()),
        StructField("at", TimestampType()),
    ]
)
SOURCE = FileSource("things", "csv", SCHEMA)

MESSY = {
    "a.csv": (
        b"id,qty,price,day,at\n"
        b"a1,1,2.50,2026-01-02,2026-01-02 10:00:00\n"
        b'"a,2",2,"3.5",2026-01-03,2026-01-03T11:00:00\n'
        b'"say ""hi""",3,,2026-01-04,\n'
        b"a4,x,1.00,2026-01-05,2026-01-05 00:00:00\n"  # qty does not convert
        b"a5,5,1.00\n"  # too few cells
        b"a6,6,1.00,2026-01-06,2026-01-06 00:00:00,extra\n"  # too many cells
        b"\n"
        b"   \n"
        b"a7,7,1.00,not-a-day,2026-01-07 00:00:00\r\n"
        b"a8,8,9.99,2026-01-08,2026-01-08 00:00:00\ra9,9,0.01,2026-01-09,2026-01-09 00:00:00\n"
        b'"unclosed,10,1.00,2026-01-10,2026-01-10 00:00:00\n'
        b"caf\xc3\xa9 \xe2\x9c\x93,11,1.00,2026-01-11,2026-01-11 00:00:00\n"
        b",,,,\n"
        b"a12, 12 ,1.00,2026-01-12,2026-01-12 00:00:00"  # no final line end
    ),
    "b é +.csv": (  # another layout, with an undeclared column (and a name URIs encode)
        b"at,day,coupon,price,qty,id\r\n"
        b"2026-02-01 00:00:00,2026-02-01,C1,1.10,1,b1\r\n"
        b"2026-02-02 00:00:00,2026-02-02,,1.20,zz,b2\r\n"
        b"2026-02-03 00:00:00,2026-02-03,C3,1.30,3\r\n"
    ),
    "c.csv": b"id,qty,price,day,at\n",  # header only
}


def _line_parse(spark: SparkSession, source: FileSource, paths: list[Path]) -> DataFrame:
    headers = read_csv_headers(source, paths)
    text = spark.read.format("text").load([str(p) for p in paths])
    parsed = parse_csv_lines(text, source, headers)
    lineage = parsed.withColumn("_source_file", F.col("_metadata.file_path"))
    return lineage.withColumn("_ingested_at", F.current_timestamp()).drop("_metadata")


def _by_reader(spark: SparkSession, source: FileSource, paths: list[Path], read: int) -> DataFrame:
    """The batch as `read_batch_by_reader` reads it, checking how many files the reader read."""
    headers = read_csv_headers(source, paths)
    lines = _line_parse(spark, source, paths)
    out = read_batch_by_reader(spark, source, headers, [str(p) for p in paths], lambda: lines, AT)
    assert out is not None
    assert out[1] == read
    return out[0]


def _rows(df: DataFrame) -> list[tuple]:
    names = [*SCHEMA.names, CORRUPT_COLUMN, "_rescued_data", "_source_file"]
    out = df.select(*[F.col(n).cast("string").alias(n) for n in names]).collect()
    return sorted((tuple(r) for r in out), key=repr)


def test_messy_files_read_by_the_reader_equal_the_line_parse(spark: SparkSession, tmp_path: Path) -> None:
    paths = land_files(tmp_path / "things", MESSY)
    headers = read_csv_headers(SOURCE, paths)
    assert reads_alike(spark, paths, [headers.header_lines[headers.by_file[p.name]] for p in paths]) == [True] * 3
    by_reader = _by_reader(spark, SOURCE, paths, read=3)
    expected = _rows(_line_parse(spark, SOURCE, paths))
    assert _rows(by_reader) == expected
    # The cases above really occur: malformed lines, rescued values, the undeclared column.
    corrupt = [r for r in expected if r[5] is not None]
    assert len(corrupt) == 8
    assert any('"coupon":"C1"' in (r[6] or "") for r in expected)
    assert len(expected) == 16


@pytest.mark.parametrize(
    "data",
    [
        b"id,qty\nx,\xff\xfe1\n",  # not UTF-8
        b"id,qty\nx,1\n\xef\xbb\xbfy,2\n",  # a byte-order mark inside
        b"id,qty\nx,1\x00\n",  # a control character
        b"id,qty\nx,1\nid,qty\ny,2\n",  # the header again
        b"\nid,qty\nx,1\n",  # not starting with its header
        b"id,qtyy\nx,1\n",  # its header not alone on its line
    ],
    ids=["not-utf8", "inner-bom", "control", "header-again", "late-header", "longer-header"],
)
def test_bytes_the_reader_would_read_otherwise_keep_the_line_parse(
    spark: SparkSession, tmp_path: Path, data: bytes
) -> None:
    path = tmp_path / "f.csv"
    path.write_bytes(data)
    assert reads_alike(spark, [path], ["id,qty"]) == [False]


# Byte sequences at the edges of UTF-8 (overlong forms, surrogates, beyond U+10FFFF, cut characters) and of the
# control characters.
EDGES = [
    b"\xc0\x80",
    b"\xc1\xbf",
    b"\xc2\x80",
    b"\xdf\xbf",
    b"\xe0\x9f\xbf",
    b"\xe0\xa0\x80",
    b"\xed\x9f\xbf",
    b"\xed\xa0\x80",
    b"\xed\xbf\xbf",
    b"\xee\x80\x80",
    b"\xef\xbf\xbf",
    b"\xf0\x8f\xbf\xbf",
    b"\xf0\x90\x80\x80",
    b"\xf4\x8f\xbf\xbf",
    b"\xf4\x90\x80\x80",
    b"\xf5\x80\x80\x80",
    b"\xff",
    b"\x80",
    b"\xe2\x82",
    b"\xe2\x82\xac",
    b"\x7f",
    b"\x1f",
    b"\x0b",
    b"\t",
    b"\r",
    b"\x00",
]


def test_the_scan_reads_utf8_and_control_characters_as_python_does(spark: SparkSession, tmp_path: Path) -> None:
    paths, expected = [], []
    for i, edge in enumerate(EDGES):
        data = b"id,qty\nx" + edge + b"y,1\n"
        try:
            data.decode("utf-8")
            clean = not any(b < 0x20 and b not in b"\t\n\r" for b in data)
        except UnicodeDecodeError:
            clean = False
        paths.append(tmp_path / f"f{i}.csv")
        paths[-1].write_bytes(data)
        expected.append(clean)
    assert reads_alike(spark, paths, ["id,qty"] * len(paths)) == expected
    assert expected.count(True) == 12  # both outcomes occur


def test_a_clean_file_with_a_leading_bom_reads_alike(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "f.csv"
    path.write_bytes(b"\xef\xbb\xbfid,qty\r\nx,1\r\n")
    gz = tmp_path / "g.csv.gz"
    gz.write_bytes(gzip.compress(b"id,qty\nx,1\n"))
    only = tmp_path / "h.csv"
    only.write_bytes(b"id,qty")
    assert reads_alike(spark, [path, gz, only], ["id,qty"] * 3) == [True, False, True]


def test_files_the_scan_refuses_come_from_the_line_parse(spark: SparkSession, tmp_path: Path) -> None:
    files = {**MESSY, "d.csv": b"id,qty,price,day,at\nd1,\xff,1.00,2026-01-01,\nid,qty,price,day,at\n"}
    paths = land_files(tmp_path / "things", files)
    by_reader = _by_reader(spark, SOURCE, paths, read=3)
    assert _rows(by_reader) == _rows(_line_parse(spark, SOURCE, paths))


def test_a_decimal_with_more_digits_than_its_scale_marks_its_row_for_a_second_parse(
    spark: SparkSession, tmp_path: Path
) -> None:
    paths = land_files(tmp_path / "things", {"e.csv": b"id,qty,price,day,at\ne1,1,1.005,2026-01-01,\ne2,2,1.01,,\n"})
    by_reader = _by_reader(spark, SOURCE, paths, read=1)
    marks = {r.id: r[CORRUPT_COLUMN] for r in by_reader.collect()}
    assert marks == {"e1": REPARSE_MARK, "e2": None}


def test_decimal_cells_are_read_as_spark_reads_them_or_marked_for_a_second_parse(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Decimal cells are read as text and converted in the JVM (CsvDecimal): a value it gives is the line parse's,
    # anything else is marked, never rounded or dropped.
    read = {"d1": '"1,234.50"', "d2": "+1.5", "d3": "1e2", "d4": ".5", "d5": "-0", "d6": "007.10", "d7": "1.50000"}
    marked = {"m1": "1.005", "m2": "abc", "m3": "1e400", "m4": "1234567.00", "m5": " 1.5", "m6": "1e-400"}
    body = "id,qty,price,day,at\n" + "".join(f"{k},1,{v},,\n" for k, v in {**read, **marked}.items())
    paths = land_files(tmp_path / "things", {"d.csv": body.encode()})
    by_reader = {r.id: (r.price, r[CORRUPT_COLUMN]) for r in _by_reader(spark, SOURCE, paths, read=1).collect()}
    line_parse = {r.id: (r.price, r[CORRUPT_COLUMN]) for r in _line_parse(spark, SOURCE, paths).collect()}
    assert {k: by_reader[k] for k in read} == {k: line_parse[k] for k in read}
    assert str(by_reader["d1"][0]) == "1234.50" and str(by_reader["d3"][0]) == "100.00"
    assert {k: by_reader[k] for k in marked} == {k: (None, REPARSE_MARK) for k in marked}
    assert all(line_parse[k][0] is None for k in ("m1", "m2", "m3", "m4", "m5"))


def test_a_source_with_its_own_separator_and_quote_rescues_as_the_line_parse(
    spark: SparkSession, tmp_path: Path
) -> None:
    # The rescue of a malformed record parses its line again, with the source's options (CsvRescued).
    source = FileSource("things", "csv", SCHEMA, options=(("sep", ";"), ("quote", "'")))
    files = {
        "s.csv": (
            b"id;qty;price;day;at;note\n"
            b"'s;1';1;2.50;2026-01-02;2026-01-02 10:00:00;n1\n"
            b"s2;two;'3.5x';2026-01-03;;'x;y'\n"  # qty and price do not convert
            b"s3;3;1.00\n"  # too few cells
        )
    }
    paths = land_files(tmp_path / "things", files)
    by_reader = _by_reader(spark, source, paths, read=1)
    expected = _rows(_line_parse(spark, source, paths))
    assert _rows(by_reader) == expected
    rescued = {r[0]: r[6] for r in expected}
    assert rescued["s2"] == '{"qty":"two","price":"3.5x","note":"x;y"}'
    assert rescued["s;1"] == '{"note":"n1"}'


def test_options_the_reader_would_read_otherwise_keep_the_line_parse() -> None:
    assert reader_applies(FileSource("t", "csv", SCHEMA, options=(("sep", ";"), ("header", "true"))))
    assert not reader_applies(FileSource("t", "csv", SCHEMA, options=(("comment", "#"),)))
    assert not reader_applies(FileSource("t", "json", SCHEMA))


def test_the_scan_reads_in_chunks_and_sees_across_their_edges(spark: SparkSession, tmp_path: Path) -> None:
    cases = [
        ("id,qty\nx,1\ncafé ✓,2\nyy,3\n".encode(), True),  # multi-byte characters split across chunks
        (b"id,qty\nx,1\nzz,2\nid,qty\n", False),  # the header again, across a chunk edge
        (b"id,qty\nx,1\nzz,2\n\xc3", False),  # a character cut off at the end
        (b"id,qty\nx,1\nz\xef\xbb\xbfz,2\n", False),  # a byte-order mark across a chunk edge
    ]
    paths = []
    for i, (data, _) in enumerate(cases):
        paths.append(tmp_path / f"f{i}.csv")
        paths[-1].write_bytes(data)
    for chunk in (1, 2, 3, 7):
        assert reads_alike(spark, paths, ["id,qty"] * len(paths), chunk) == [alike for _, alike in cases], chunk
