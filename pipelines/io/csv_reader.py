"""Landed CSV files read by Spark's own CSV reader, for the files where that reads exactly what the line parse reads.

The line parse (`pipelines.io.landing_parse.parse_csv_lines`) keeps every promise for any bytes, but it pays for
reading the file as text first and then parsing each line as a value: about 2.7x Spark's CSV reader. The reader
parses the same lines with the same parser (Univocity, the same options), so for a file where nothing tells the
two apart it gives the same rows. What tells them apart is decided from the file's bytes on the driver, before
the batch is read (`reads_alike`, a scan at memory speed):

- bytes that are not UTF-8 (the reader would replace them silently; the line parse marks the line corrupt), a
  byte-order mark after the start, and control characters other than tab and line ends (the reader's blank-line
  test trims them);
- a file that does not start with the header the run read, or that repeats it (the line parse drops every copy);
- a compressed file (its bytes are not scanned here).

Such a file goes through the line parse. The reader's malformed records carry their line in `_corrupt_record`
and get `_rescued_data` from the same text parse. Decimal cells are read as text and converted by `CsvDecimal`
(infra/jvm): Spark's own decimal parse, without its per-value regular expression and wide rounding, which made
the typed read about 30 % slower. A cell it does not read exactly (a decimal with more digits than its scale, or
text that is no decimal) cannot be given its line here, so its row is marked (`REPARSE_MARK`) and the batch is
parsed again line by line before anything is written (`pipelines.sources.file_health`).
"""

from __future__ import annotations

import codecs
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DecimalType, StringType, StructField, StructType

from infra.paths import COMPRESSED_SUFFIXES, local_path
from infra.spark_functions import csv_decimal_function
from pipelines.io.landing import read_as_pattern
from pipelines.io.landing_parse import (
    BOM,
    CORRUPT_COLUMN,
    READER_ONLY_OPTIONS,
    RESCUED_COLUMN,
    CsvHeaders,
)
from pipelines.io.landing_values import csv_rescued, named_column, wide_type
from pipelines.spec.sources import FileSource

# `_corrupt_record` of a row whose decimal has more digits than its scale: never a landed line (no NUL byte passes
# `reads_alike`), and never written (the batch is parsed again line by line).
REPARSE_MARK = "\x00tributary:reparse"
# Options that mean the same to the reader and to the line parse; any other option keeps a source on the line parse.
_SAME_MEANING = {"sep", "delimiter", "quote", "escape", "nullValue", "emptyValue", "dateFormat", "timestampFormat"}
# Every byte but the control characters the reader's blank-line test trims (all but tab and line ends): deleting
# them from a chunk leaves only those (bytes.translate runs at memory speed; a regular expression at 30 MB/s).
_NOT_CONTROL = bytes(b for b in range(256) if b >= 0x20 or b in b"\t\n\r")
_CHUNK = 1 << 22
_BOM_BYTES = BOM.encode()


def reader_applies(source: FileSource) -> bool:
    """Whether the source's options mean the same to Spark's CSV reader as to the line parse."""
    return source.format == "csv" and all(k in _SAME_MEANING or k in READER_ONLY_OPTIONS for k, _ in source.options)


def reads_alike(path: Path, header_line: str) -> bool:
    """Whether Spark's CSV reader reads the same records from the file at `path` as the line parse (see the module
    docstring); the file is read once, in chunks."""
    if path.suffix in COMPRESSED_SUFFIXES:
        return False
    header = header_line.encode()
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset, tail = 0, b""
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(_CHUNK):
                if offset == 0:
                    start = len(_BOM_BYTES) if chunk.startswith(_BOM_BYTES) else 0
                    end = start + len(header)
                    if not chunk.startswith(header, start) or chunk[end : end + 1] not in (b"\n", b"\r", b""):
                        return False  # not its header first, alone on its line
                    body = chunk[end:]
                else:
                    body = chunk
                if chunk.translate(None, _NOT_CONTROL):
                    return False
                if not chunk.isascii():  # (a byte-order mark is not ASCII)
                    if _BOM_BYTES in body:
                        return False
                    decoder.decode(chunk)
                # A copy of the header after the first line, also across the chunk boundary.
                if header in body or header in tail + body[: len(header)]:
                    return False
                tail = body[-len(header) :] if len(body) >= len(header) else (tail + body)[-len(header) :]
                offset += len(chunk)
            decoder.decode(b"", final=True)
    except (OSError, UnicodeDecodeError):
        return False
    return True


def split_files(headers: CsvHeaders, files: list[str]) -> tuple[dict[int, list[str]], list[str]]:
    """The batch's files for the reader by layout index, and the rest (for the line parse)."""
    by_layout: dict[int, list[str]] = {}
    rest: list[str] = []
    for uri in files:
        path = local_path(uri)
        layout = headers.by_file.get(path.name) if path is not None else None
        if (
            path is None
            or layout is None
            or path.name in headers.problems
            or read_as_pattern(path)  # a path the reader would take as a pattern
            or not reads_alike(path, headers.header_lines[layout])
        ):
            rest.append(uri)
        else:
            by_layout.setdefault(layout, []).append(uri)
    return by_layout, rest


def _cell_type(f: StructField) -> DataType:
    """The type the reader reads a declared column's cells as: text for a decimal that must be exact."""
    return StringType() if wide_type(f) != f.dataType else f.dataType


def _exact_values(spark: SparkSession, schema: StructType) -> tuple[dict[str, Column], Column]:
    """Each column's value from its cell (see `_cell_type`), NULL for a decimal not read exactly; and a column TRUE
    when some decimal cell was not."""
    values: dict[str, Column] = {}
    inexact: Column = F.lit(False)
    for f in schema.fields:
        cell = named_column(f.name)
        if _cell_type(f) == f.dataType:
            values[f.name] = cell
            continue
        t = f.dataType
        assert isinstance(t, DecimalType)
        value = F.call_function(csv_decimal_function(spark, t), cell, F.lit(t.precision), F.lit(t.scale))
        values[f.name] = value
        inexact = inexact | (value.isNull() & cell.isNotNull())
    return values, inexact


def read_layout(spark: SparkSession, source: FileSource, names: tuple[str, ...], files: list[str]) -> DataFrame:
    """The files of one layout through Spark's CSV reader, as `parse_csv_lines` shapes rows (with `_source_file`)."""
    declared = {f.name: _cell_type(f) for f in source.schema.fields}
    schema = StructType(
        [StructField(n, declared.get(n, StringType())) for n in names] + [StructField(CORRUPT_COLUMN, StringType())]
    )
    options = {k: v for k, v in source.options if k not in READER_ONLY_OPTIONS}
    options.update(header="true", enforceSchema="true", mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT_COLUMN)
    read = spark.read.schema(schema).options(**options).csv(files)
    present = StructType([f for f in source.schema.fields if f.name in names])
    values, inexact = _exact_values(spark, present)
    corrupt = F.col(CORRUPT_COLUMN)
    extra = [n for n in names if n not in declared]
    typed = read.select(
        *[values.get(f.name, F.lit(None).cast(f.dataType)).alias(f.name) for f in source.schema.fields],
        F.when(corrupt.isNull() & inexact, F.lit(REPARSE_MARK)).otherwise(corrupt).alias(CORRUPT_COLUMN),
        *[named_column(n).alias(f"_extra{i}") for i, n in enumerate(extra)],
        F.col("_metadata.file_path").alias("_source_file"),
    )
    # The text of every cell is parsed only for a malformed record (rare): the values `_rescued_data` keeps.
    text_options = {k: v for k, v in options.items() if k not in ("header", "enforceSchema")}
    malformed = F.col(CORRUPT_COLUMN).isNotNull()
    kept = {f.name: named_column(f.name) for f in present.fields}
    extras = [F.col(f"_extra{i}") for i in range(len(extra))]
    rescued = csv_rescued(F.when(malformed, F.col(CORRUPT_COLUMN)), names, kept, extras, text_options)
    return typed.select(
        *[named_column(n) for n in source.schema.names],
        CORRUPT_COLUMN,
        F.when(malformed | F.lit(bool(extra)), rescued).alias(RESCUED_COLUMN),
        "_source_file",
    )
