"""Landed JSON-lines files read by Spark's JSON reader (`pipelines/io/json_reader.py`) give exactly the line parse's
rows.

- `alike_records`: the JVM byte scan that sends a file to the line parse (not UTF-8, a byte-order mark, a control
  character, a line that is not one object and not an object broken inside, an undeclared key, a surrogate
  escape, compressed).
- `read_batch_by_reader`: on messy files the scan accepts (values that do not convert, nested values under string
  columns, single quotes, raw tabs in strings, duplicate keys, objects cut off or broken inside, blank lines, CRLF
  and lone CR line ends, non-ASCII text, no final line end, strict JSON and escaped keys) the rows equal the line
  parse's, value for value; a file the scan refuses is taken from the line parse, as is one with a decimal that
  has more digits than its scale.
"""

from __future__ import annotations

import gzip
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DateType,
    DecimalType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pipelines.io.json_reader import ProofAhead, alike_records, reader_applies, split_files
from pipelines.io.landing_parse import CORRUPT_COLUMN, parse_json_lines
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
        StructField("ok", BooleanType()),
    ]
)
SOURCE = FileSource("things", "json", SCHEMA)

MESSY = {
    "a.json": (
        b'{"id":"a1","qty":1,"price":2.50,"day":"2026-01-02","at":"2026-01-02 10:00:00","ok":true}\n'
        b'{"id":"a2","qty":"x","price":1}\n'  # qty does not convert
        b'{"id":"a3","qty":1.5}\n'
        b'{"id":"a4","day":"not-a-day","at":"2026-01-04T11:00:00Z"}\n'
        b'{"id":{"nested":[1,2]},"qty":99999999999}\n'  # an object under a string column; qty overflows
        b'{"id":["x"],"price":"3.5","ok":"yes"}\n'
        b"\n"
        b"   \t \n"
        b'{"id":"a7","price":1e2}\r\n'
        b'{"id":"a8"}\r{"id":"a9","qty":null}\n'
        b"{'id':'a10','qty':10}\n"  # single quotes
        b'{"id":"a\tb"}\n'  # a raw tab in a string
        b'{"id":"x","id":"a12"}\n'  # a key twice
        b'  {"id":"}{\\"a13\\"","qty":13}  \n'
        b"{}\n"
        b'{"id":true,"qty":-2147483648,"price":-999999.99}\n'
        # Objects Spark's parser fails inside: one corrupt record each, without values.
        b'{"id":"a17","qty":17,"pr\n'
        b'{"id":"a18","qty":\n'
        b'{"id":"a19" /* c */}\n'
        b'{"id":"a20",}\n'
        b'{"id":"a21","qty":NaN,\n'
        b'{"id":"a22","qty":[1,\n'
        b'{"id":"a23" "qty":1}\n'
        b'{"qty":01}\n{"qty":-}\n{"qty":1.}\n{"qty":.5}\n{"ok":tru}\n{"id":"\\x"}\n{"id":"\\u12G4"}\n'
        # Strict JSON the fast path reads, and escapes it leaves to Jackson.
        b'{ "id" : "a31" , "qty" : -0.0e+1 ,"at":null, "ok" : false }  \n'
        b'{"id":{"a":{"b":[[[]],{},[1,-2.5E-3,true,null,"\\u00e9\\/\\b"]]}},"price":0}\n'
        b'{"i\\u0064":"a33","qty":33}\n'
        b'{"id":"a34\xef\xbb\xbf\x7f"}\n'
    ),
    "b é +.json": (  # a name URIs encode
        '{"id":"caf\u00e9 \u2713","price":"0.10"}\r\n'
        '{"id":"\\u00e9\\n\\"","at":"2026-02-02"}\r\n'
        '{"id":"last","ok":false}'  # no final line end
    ).encode(),
    "c.json": b"",
    "d.json": b"\n\n",
}


def reads_alike(spark: SparkSession, paths: list[Path], names: list[str], decimals=None, chunk=None) -> list[bool]:
    """Per path: whether the scan finds the file read alike (`alike_records` counts its records)."""
    return [n is not None for n in alike_records(spark, paths, names, decimals, chunk)]


def _line_parse(spark: SparkSession, source: FileSource, paths: list[Path]) -> DataFrame:
    text = spark.read.format("text").load([str(p) for p in paths])
    parsed = parse_json_lines(text, source).withColumn("_source_file", F.col("_metadata.file_path"))
    return parsed.withColumn("_ingested_at", F.current_timestamp()).drop("_metadata")


def _by_reader(spark: SparkSession, source: FileSource, paths: list[Path], read: int) -> DataFrame:
    """The batch as `read_batch_by_reader` reads it, checking how many files the reader read."""
    out = read_batch_by_reader(
        spark, source, None, [str(p) for p in paths], lambda: _line_parse(spark, source, paths), AT
    )
    assert out is not None
    assert out[1] == read
    return out[0]


def _rows(df: DataFrame) -> list[tuple]:
    names = [*SCHEMA.names, CORRUPT_COLUMN, "_rescued_data", "_source_file"]
    out = df.select(*[F.col(n).cast("string").alias(n) for n in names]).collect()
    return sorted((tuple(r) for r in out), key=repr)


def test_messy_files_read_by_the_reader_equal_the_line_parse(spark: SparkSession, tmp_path: Path) -> None:
    paths = land_files(tmp_path / "things", MESSY)
    assert reads_alike(spark, paths, SCHEMA.names) == [True] * 4
    expected = _rows(_line_parse(spark, SOURCE, paths))
    # The proof counts each file's records: the line parse's rows per file (blank lines and CRLF ends give none).
    per_file = [sum(1 for r in expected if unquote(r[8].rsplit("/", 1)[1]) == p.name) for p in paths]
    assert alike_records(spark, paths, SCHEMA.names) == per_file == [33, 3, 0, 0]
    assert _rows(_by_reader(spark, SOURCE, paths, read=4)) == expected
    # The cases above really occur: corrupt records with rescued text, and every non-blank line is one row.
    corrupt = [r for r in expected if r[6] is not None]
    assert len(corrupt) >= 5
    assert any('"qty":"x"' in (r[7] or "") for r in corrupt)
    assert len(expected) == 36
    assert [r[:6] for r in corrupt if "'a10'" in r[6]] == [(None,) * 6]  # single quotes are not JSON
    broken = [r for r in corrupt if any(f'"a{i}"' in r[6] for i in range(17, 24))]
    assert len(broken) == 7 and all(r[:6] == (None,) * 6 and r[7] is None for r in broken)


@pytest.mark.parametrize(
    "data",
    [
        b'{"id":"\xff"}\n',  # not UTF-8
        b'{"id":"\xed\xa0\x80"}\n',  # a UTF-16 surrogate encoded as UTF-8
        b'\xef\xbb\xbf{"id":"x"}\n',  # a byte-order mark
        b'{"id":"x\x01"}\n',  # a control character
        b'{"id":"x"}\n\x0b\n',  # a vertical tab (blank to the line parse, an error to the reader)
        b'{"id":"x"}\n[{"id":"y"}]\n',  # not an object
        b'{"id":"x"}{"id":"y"}\n',  # two objects on a line
        b'{"id":"x"} trailing\n',
        b'{"id":"x","coupon":"C1"}\n',  # an undeclared key
        b'{"id":"\\ud800"}\n',  # half a surrogate pair
        b'{"id":"\\uD83D\\uDE00"}\n',  # a whole pair: refused too (the scan does not pair them)
        b'{"qty":NaN}\n',  # a number to Spark's parser
        b'{"id":"x"}}\n',
        b'{"":1}\n',
        b'{"id":"x","Id":"y"}\n',
        b'{"id":"x"} {}\n',
        b'{"id":"x"}\n"text"\n',
    ],
)
def test_bytes_the_reader_would_read_otherwise_keep_the_line_parse(
    spark: SparkSession, tmp_path: Path, data: bytes
) -> None:
    path = tmp_path / "f.json"
    path.write_bytes(data)
    assert reads_alike(spark, [path], SCHEMA.names) == [False]


def test_files_the_scan_refuses_come_from_the_line_parse(spark: SparkSession, tmp_path: Path) -> None:
    files = {
        **MESSY,
        "e.json": b'{"id":"e1","qty":1}\n{"id":"e2","coupon":"C9"}\n[1,2]\n{"id":"\xff"}\n',
        "f.json.gz": gzip.compress(b'{"id":"f1"}\n'),
    }
    paths = land_files(tmp_path / "things", files)
    by_reader = _by_reader(spark, SOURCE, paths, read=4)
    rows = _rows(by_reader)
    assert rows == _rows(_line_parse(spark, SOURCE, paths))
    assert any('"coupon":"C9"' in (r[7] or "") for r in rows)
    assert sum(1 for r in rows if r[8].endswith("e.json")) == 4
    assert sum(1 for r in rows if r[8].endswith("f.json.gz")) == 1


@pytest.mark.parametrize(
    "price",
    ["1.005", "1.0050", '"1.005"', '"1,000.001"', "1e-3", "1.5E-2", "-0.001", "12345.6789e1", "1e-400"],
)
def test_a_decimal_with_more_digits_than_its_scale_keeps_its_file_on_the_line_parse(
    spark: SparkSession, tmp_path: Path, price: str
) -> None:
    # The reader reads decimals at their declared type and would round this one; the line parse rescues it.
    path = tmp_path / "e.json"
    path.write_bytes(b'{"id":"e2","price":1.01}\n{"id":"e1","price":%s}\n' % price.encode())
    assert reads_alike(spark, [path], SCHEMA.names, {"price": 2}) == [False]
    assert reads_alike(spark, [path], SCHEMA.names) == [True]  # (a decimal that is rounded on landing)


def test_exact_decimals_in_every_form_are_read_by_the_reader_as_the_line_parse(
    spark: SparkSession, tmp_path: Path
) -> None:
    prices = ["1.50000", '"1,234.5"', "1e2", "-0.0e+1", "12.3400E1", '"x1"', "true", "[1.555]", "null", "0E-400"]
    body = "".join(f'{{"id":"p{i}","price":{p}}}\n' for i, p in enumerate(prices))
    paths = land_files(tmp_path / "things", {"p.json": body.encode()})
    rows = _rows(_by_reader(spark, SOURCE, paths, read=1))
    assert rows == _rows(_line_parse(spark, SOURCE, paths))
    assert {r[0]: r[2] for r in rows if r[0] in ("p0", "p1", "p4")} == {"p0": "1.50", "p1": "1234.50", "p4": "123.40"}


def test_options_the_reader_would_read_otherwise_keep_the_line_parse() -> None:
    assert reader_applies(FileSource("t", "json", SCHEMA, options=(("timestampFormat", "yyyy-MM-dd HH:mm"),)))
    assert not reader_applies(FileSource("t", "json", SCHEMA, options=(("allowComments", "true"),)))
    assert not reader_applies(FileSource("t", "csv", SCHEMA))


def test_the_scan_reads_in_chunks_and_sees_across_their_edges(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    # Multi-byte characters split across chunks, and lines longer than a chunk.
    path.write_bytes('{"id":"café ✓"}\n{"id":"a long line, longer than a chunk"}\r\n{"id":"é"}'.encode())
    assert reads_alike(spark, [path], SCHEMA.names, chunk=7) == [True]
    path.write_bytes(b'{"id":"x"}\n{"id":"y"}\n{"id":"z"}\n{"coupon":1}\n')  # the odd line past many chunks
    assert reads_alike(spark, [path], SCHEMA.names, chunk=7) == [False]
    path.write_bytes(b'{"id":"x"}\n{"id":"\xc3')  # a character cut off at the end
    assert reads_alike(spark, [path], SCHEMA.names, chunk=7) == [False]
    assert reads_alike(spark, [tmp_path / "missing.json"], SCHEMA.names) == [False]


def test_keys_in_any_order_are_judged_alike(spark: SparkSession, tmp_path: Path) -> None:
    # The scan tries the name after the last one it found first: other orders, repeats and a near-miss name must be
    # judged as in any order.
    path = tmp_path / "f.json"
    usual = '{"id":"u","qty":1,"price":1.5,"day":"2026-01-01","at":null,"ok":true}\n'
    others = '{"ok":false,"at":null,"day":null,"price":2,"qty":2,"id":"r"}\n{"qty":3,"qty":4,"id":"s"}\n'
    path.write_bytes((usual * 3 + others + usual).encode())
    assert reads_alike(spark, [path], SCHEMA.names, {"price": 2}) == [True]
    path.write_bytes((usual + '{"id":"u","qtx":1}\n' + usual).encode())
    assert reads_alike(spark, [path], SCHEMA.names) == [False]


def test_a_file_changed_after_the_proof_ahead_is_proved_again(spark: SparkSession, tmp_path: Path) -> None:
    clean = b'{"id":"a1","qty":1}\n{"id":"a2","qty":2}\n'
    paths = land_files(tmp_path / "things", {"a.json": clean, "b.json": clean})
    ahead = ProofAhead(spark, SOURCE, paths)
    assert ahead.records(paths) == {paths[0]: 2, paths[1]: 2}
    # b.json gains a line the reader would split into two rows (an array) after it was proved.
    paths[1].write_bytes(clean + b'[{"id":"a3"},{"id":"a4"}]\n')
    assert ahead.records(paths) == {paths[0]: 2}
    uris = [str(p) for p in paths]
    assert split_files(spark, SOURCE, uris, ahead) == ({uris[0]: 2}, [uris[1]])
    lines = _line_parse(spark, SOURCE, paths)
    out = read_batch_by_reader(spark, SOURCE, None, uris, lambda: lines, AT, ahead)
    assert out is not None and out[1] == 1
    assert _rows(out[0]) == _rows(lines) and len(_rows(lines)) == 5
