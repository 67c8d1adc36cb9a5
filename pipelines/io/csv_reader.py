"""Landed CSV files read by Spark's own CSV reader, for the files where that reads exactly what the line parse reads.

The line parse (`pipelines.io.landing_parse.parse_csv_lines`) keeps every promise for any bytes, but it pays for
reading the file as text first and then parsing each line as a value: about 2.7x Spark's CSV reader. The reader
parses the same lines with the same parser (Univocity, the same options), so for a file where nothing tells the
two apart it gives the same rows. What tells them apart is decided from the file's bytes on the driver, before
the batch is read (`reads_alike`, one pass over each file in the JVM, files in parallel):

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

import json
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DecimalType, StringType, StructField, StructType

from infra.paths import COMPRESSED_SUFFIXES, local_path
from infra.spark_functions import csv_decimal_function, landed_file_path
from pipelines.io.landing import read_as_pattern
from pipelines.io.landing_parse import (
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


def reader_applies(source: FileSource) -> bool:
    """Whether the source's options mean the same to Spark's CSV reader as to the line parse."""
    return source.format == "csv" and all(k in _SAME_MEANING or k in READER_ONLY_OPTIONS for k, _ in source.options)


def reads_alike(
    spark: SparkSession, paths: list[Path], header_lines: list[str], chunk: int | None = None
) -> list[bool]:
    """Per path: whether Spark's CSV reader reads the same records from the file as the line parse, given the
    header line the run read for it (see the module docstring). One pass over each file in the JVM (infra/jvm
    `CsvFileProof`), files in parallel, `chunk` bytes at a time."""
    if not paths:
        return []
    proof = spark._jvm.tributary.landing.CsvFileProof  # type: ignore[union-attr]
    scanned = [i for i, p in enumerate(paths) if p.suffix not in COMPRESSED_SUFFIXES]  # compressed: not scanned
    args = [json.dumps([str(paths[i]) for i in scanned]), json.dumps([header_lines[i] for i in scanned])]
    flags = str(proof.readsAlike(*args) if chunk is None else proof.readsAlike(*args, chunk))
    alike = [False] * len(paths)
    for i, flag in zip(scanned, flags, strict=True):
        alike[i] = flag == "1"
    return alike


def split_files(spark: SparkSession, headers: CsvHeaders, files: list[str]) -> tuple[dict[int, list[str]], list[str]]:
    """The batch's files for the reader by layout index, and the rest (for the line parse)."""
    candidates: dict[str, tuple[Path, int]] = {}
    rest: list[str] = []
    for uri in files:
        path = local_path(uri)
        layout = headers.by_file.get(path.name) if path is not None else None
        if (
            path is None
            or layout is None
            or path.name in headers.problems
            or read_as_pattern(path)  # a path the reader would take as a pattern
        ):
            rest.append(uri)
        else:
            candidates[uri] = (path, layout)
    paths = [path for path, _ in candidates.values()]
    alike = reads_alike(spark, paths, [headers.header_lines[layout] for _, layout in candidates.values()])
    by_layout: dict[int, list[str]] = {}
    for (uri, (_, layout)), ok in zip(candidates.items(), alike, strict=True):
        if ok:
            by_layout.setdefault(layout, []).append(uri)
        else:
            rest.append(uri)
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
        # (Anchored on a cell: Spark refuses a query reading only `_corrupt_record`.)
        landed_file_path(named_column(names[0]).isNull()).alias("_source_file"),
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
