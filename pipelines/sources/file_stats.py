"""The figures of each landed file in a batch (rows, corrupt rows, rows with rescued data, rows to parse again,
undeclared field names), from which `pipelines.sources.file_health` judges the file.

They are taken in one aggregation over the batch, grouped by file (`file_stats`), or observed while the batch
is written (`observed_files`, `observed_figures`, `read_observed`), which spares reading the written rows back: a
few aggregates evaluated in the write's own pass, each file's counts kept as one histogram bin per file. The
observed figures are checked against the batch's own totals and refused (None, and the batch is read back) unless
every row is counted under exactly one of the batch's files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.io.csv_reader import REPARSE_MARK
from pipelines.io.landing_parse import CORRUPT_COLUMN, RESCUED_COLUMN, unknown_fields
from pipelines.spec.sources import FileSource

# Most files a batch may hold for its figures to be observed: one histogram bin per file keeps every count exact
# (a histogram merges bins only when it has more distinct values than bins).
OBSERVED_FILES = 64
# A file's bin: the low 53 bits of Spark's xxhash64 of its URI (seed 42, as `F.xxhash64`), exact as the double a
# histogram keeps. Hashing a row's file costs a third of testing it against each of the batch's URIs in turn.
KEY_BITS = (1 << 53) - 1
_XXHASH_SEED = 42


@dataclass(frozen=True)
class FileStats:
    """The figures of one landed file in a batch (`file` as the rows' `_source_file` names it)."""

    file: str
    rows: int
    corrupt: int
    rescued: int
    reparse: int
    new_fields: list[str]


def file_stats(batch: DataFrame, source: FileSource) -> list[FileStats]:
    """Per landed file of a batch (one aggregation, grouped by file)."""
    rows = batch.groupBy(F.col("_source_file")).agg(
        F.count(F.lit(1)).alias("rows"),
        F.count(CORRUPT_COLUMN).alias("corrupt"),
        F.count(RESCUED_COLUMN).alias("rescued"),
        F.count(F.when(F.col(CORRUPT_COLUMN) == REPARSE_MARK, 1)).alias("reparse"),
        F.array_distinct(F.flatten(F.collect_set(unknown_fields(source.schema)))).alias("new_fields"),
    )
    return [FileStats(r[0], r[1], r[2], r[3], r[4], sorted(r[5])) for r in rows.collect()]


def _file_uris(spark: SparkSession, files: list[str]) -> list[str]:
    """The local `files` as Spark's `_metadata.file_path` names them (`java.io.File.toURI`)."""
    return [spark._jvm.java.io.File(f).toURI().toString() for f in files]  # type: ignore[union-attr]


@dataclass(frozen=True)
class ObservedFiles:
    """The files of a batch whose figures are observed: their URIs (as `_metadata.file_path` names them) and each
    one's bin key."""

    uris: tuple[str, ...]
    keys: tuple[int, ...]
    # Each file's records as the proof of Spark's JSON reader counted them (`json_reader.alike_records`): the rows
    # the batch reads from it, not counted again; None when not known for every file.
    records: tuple[int, ...] | None = None


def observed_files(
    spark: SparkSession, files: list[str], records: Mapping[str, int] | None = None
) -> ObservedFiles | None:
    """The batch's `files` with their bin keys (`KEY_BITS`) and, when `records` holds every one, their records;
    None when they cannot be observed: none, more than `OBSERVED_FILES`, or two files with one key."""
    if not files or len(files) > OBSERVED_FILES:
        return None
    uris = _file_uris(spark, files)
    jvm: Any = spark._jvm
    text, xxhash = jvm.org.apache.spark.unsafe.types.UTF8String, jvm.org.apache.spark.sql.catalyst.expressions.XXH64
    keys = [xxhash.hashUTF8String(text.fromString(uri), _XXHASH_SEED) & KEY_BITS for uri in uris]
    if len(set(keys)) != len(keys):
        return None
    counted = tuple(records[f] for f in files) if records is not None and all(f in records for f in files) else None
    return ObservedFiles(tuple(uris), tuple(keys), counted)


def observed_figures(source: FileSource, files: ObservedFiles | None) -> list[Column]:
    """Aggregates to observe on a batch of `files` while it is written (none when there are no such files)."""
    if files is None:
        return []
    corrupt, rescued = F.col(CORRUPT_COLUMN), F.col(RESCUED_COLUMN)
    # Another file's rows fall in a bin of no key of the batch (a 53-bit key shared by chance aside), so they are seen.
    index = F.xxhash64(F.col("_source_file")).bitwiseAND(F.lit(KEY_BITS))

    def per_file(rows: Column) -> Column:
        return F.to_json(F.call_function("histogram_numeric", F.when(rows, index), F.lit(OBSERVED_FILES)))

    unknown = unknown_fields(source.schema)
    fields = F.when(rescued.isNotNull() & (F.size(unknown) > 0), F.struct(index.alias("i"), unknown.alias("f")))
    # Rows per file cost a histogram update per row (about 5 % of a JSON batch's write): skipped when counted.
    rows_per_file = [] if files.records is not None else [per_file(F.lit(True)).alias("rows_per_file")]
    return [
        F.count(F.lit(1)).alias("rows"),
        F.count(corrupt).alias("corrupt"),
        F.count(rescued).alias("rescued"),
        # Not `count_if`: observed, it costs about 0.15 s per million rows more than a count of a CASE (Spark 4.1).
        F.count(F.when(corrupt == REPARSE_MARK, 1)).alias("reparse"),
        *rows_per_file,
        per_file(corrupt.isNotNull()).alias("corrupt_per_file"),
        per_file(rescued.isNotNull()).alias("rescued_per_file"),
        F.to_json(F.collect_set(fields)).alias("new_fields"),
    ]


def _per_file(text: str | None, keys: set[int], total: int) -> dict[int, int] | None:
    """A histogram's bins as counts per file key; None unless each is a count of one of the `keys` and they add
    up to `total`."""
    counts: dict[int, int] = {}
    for item in json.loads(text) if text else []:
        x, y = item["x"], item["y"]
        if x != int(x) or int(x) not in keys or y != int(y) or int(x) in counts:
            return None
        counts[int(x)] = int(y)
    return counts if sum(counts.values()) == total else None


def read_observed(files: ObservedFiles, metrics: dict[str, Any] | None) -> list[FileStats] | None:
    """The per-file figures of `observed_figures`' `metrics` (rows per file from the files' counted `records`
    where known); None when they are missing, do not add up, or a row is to be parsed again (the batch is then
    read back)."""
    if not metrics or metrics["reparse"]:
        return None
    keys = set(files.keys)
    per_file = {}
    if files.records is not None:
        if sum(files.records) != metrics["rows"]:
            return None
        per_file["rows"] = {k: n for k, n in zip(files.keys, files.records, strict=True) if n}
    for name in ("corrupt", "rescued") if files.records is not None else ("rows", "corrupt", "rescued"):
        counts = _per_file(metrics[f"{name}_per_file"], keys, metrics[name])
        if counts is None:
            return None
        per_file[name] = counts
    new_fields: dict[int, set[str]] = {}
    for item in json.loads(metrics["new_fields"] or "[]"):
        new_fields.setdefault(item["i"], set()).update(item["f"])
    uri_of = dict(zip(files.keys, files.uris, strict=True))
    found = [
        FileStats(
            uri_of[k],
            n,
            per_file["corrupt"].get(k, 0),
            per_file["rescued"].get(k, 0),
            0,
            sorted(new_fields.get(k, ())),
        )
        for k, n in per_file["rows"].items()
    ]
    return sorted(found, key=lambda f: f.file)
