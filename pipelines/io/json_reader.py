"""Landed JSON-lines files read by Spark's own JSON reader, for the files where it reads exactly what the line parse
reads.

The line parse (`pipelines.io.landing_parse.parse_json_lines`) keeps every promise for any bytes, but it reads
each file as text and then hands every line to `from_json` (which reads characters, where the reader parses the
bytes): about 2x Spark's JSON reader. Both parse the same lines with the same parser and options, so for a file
where nothing tells them apart they give the same records. What tells them apart is decided from the file's bytes
on the driver, before the batch is read, by one Jackson pass per line in the JVM (infra/jvm `JsonFileProof`,
files in parallel):

- bytes that are not UTF-8 (the reader would replace them silently; the line parse marks the line corrupt), a
  byte-order mark, and control characters other than tab and line ends;
- a line that is not exactly one JSON object (the reader would drop what follows the object, or split an array),
  unless it is an object Spark's parser fails inside (the reader then gives one corrupt record holding the line,
  as the line parse does), and a line whose keys are not all declared (the line parse keeps them in
  `_rescued_data`);
- an escape of half a UTF-16 surrogate pair (the reader would store `?`), conservatively any `\\uD800`-`\\uDFFF`;
- a value of a declared decimal with a nonzero digit beyond its scale: the reader reads decimals at their declared
  type, which would round it, where the line parse reads them wide and rescues it (parsing every decimal wide and
  testing it made the read about 25 % slower);
- a compressed file (its bytes are not scanned here).

Such a file goes through the line parse. The reader's corrupt records carry their line in `_corrupt_record` and get
`_rescued_data` from the same text parse as the line parse's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from infra.paths import COMPRESSED_SUFFIXES, local_path
from infra.spark_functions import landed_file_path
from pipelines.io.landing import read_as_pattern
from pipelines.io.landing_parse import CORRUPT_COLUMN, RESCUED_COLUMN, STRICT_JSON, with_corrupt
from pipelines.io.landing_values import NOT_ONE_OBJECT, exact_scales, json_line_shape, json_rescued, named_column
from pipelines.spec.sources import FileSource

# Options that mean the same to the reader and to the line parse; any other option keeps a source on the line parse.
_SAME_MEANING = {"dateFormat", "timestampFormat", "timestampNTZFormat", "timeZone", "locale"}


def reader_applies(source: FileSource) -> bool:
    """Whether the source's options mean the same to Spark's JSON reader as to the line parse (with a `locale`,
    decimals in strings are read by that locale, which the scan does not follow)."""
    options = dict(source.options)
    if "locale" in options and exact_scales(source.schema):
        return False
    return source.format == "json" and all(k in _SAME_MEANING for k in options)


def alike_records(
    spark: SparkSession,
    paths: list[Path],
    names: list[str],
    decimals: Mapping[str, int] | None = None,
    chunk: int | None = None,
) -> list[int | None]:
    """Per path: the records of the file (its lines that are not blank) when Spark's JSON reader reads the same
    records from it as the line parse, for the declared field `names` and the exact `decimals` among them (name
    to scale, see the module docstring); None when it does not. Files are read in parallel, `chunk` bytes at a
    time."""
    if not paths:
        return []
    proof = spark._jvm.tributary.landing.JsonFileProof  # type: ignore[union-attr]
    args = [json.dumps([str(p) for p in paths]), json.dumps(names), json.dumps(dict(decimals or {}))]
    counts = proof.alikeRecords(*args) if chunk is None else proof.alikeRecords(*args, chunk)
    return [None if n < 0 else n for n in map(int, counts.split(","))]


def _provable(path: Path | None) -> bool:
    return path is not None and path.suffix not in COMPRESSED_SUFFIXES and not read_as_pattern(path)


class ProofAhead:
    """`alike_records` of a run's unread landed files, proved on a thread of its own from the run's start: the
    proof then runs while the stream starts, rather than in the batch with Spark waiting for it. A file whose
    size or modification time changed since is proved again by the batch."""

    def __init__(self, spark: SparkSession, source: FileSource, paths: list[Path]) -> None:
        self._stamps = {p: _stamp(p) for p in paths if _provable(p)}
        names, decimals = source.schema.names, exact_scales(source.schema)
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="json-proof")
        self._records: Future[list[int | None]] = pool.submit(alike_records, spark, list(self._stamps), names, decimals)
        pool.shutdown(wait=False)  # the thread ends with the proof

    def records(self, paths: list[Path]) -> dict[Path, int | None]:
        """What was proved ahead (`alike_records`) for those of `paths` unchanged since (none if the proof
        failed)."""
        try:
            found = dict(zip(self._stamps, self._records.result(), strict=True))
        except Exception:  # proved again in the batch, where a failure is reported
            return {}
        return {p: found[p] for p in paths if p in found and _stamp(p) == self._stamps[p]}


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


def split_files(
    spark: SparkSession, source: FileSource, files: list[str], ahead: ProofAhead | None = None
) -> tuple[dict[str, int], list[str]]:
    """The batch's files Spark's JSON reader reads alike (`alike_records`, or proved `ahead`) with their records,
    and the rest (for the line parse)."""
    candidates: dict[str, Path] = {}
    rest: list[str] = []
    for uri in files:
        path = local_path(uri)
        if path is not None and _provable(path):
            candidates[uri] = path
        else:
            rest.append(uri)
    records = ahead.records(list(candidates.values())) if ahead and candidates else {}
    unproved = [p for p in candidates.values() if p not in records]
    proved = alike_records(spark, unproved, source.schema.names, exact_scales(source.schema))
    records.update(zip(unproved, proved, strict=True))
    alike: dict[str, int] = {}
    for uri, path in candidates.items():
        count = records[path]
        if count is None:
            rest.append(uri)
        else:
            alike[uri] = count
    return alike, rest


def read_json_files(spark: SparkSession, source: FileSource, files: list[str]) -> DataFrame:
    """`files` (read alike, see `split_files`) through Spark's JSON reader, as `parse_json_lines` shapes rows (with
    `_source_file`)."""
    options = {**STRICT_JSON, **dict(source.options), "mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}
    read = spark.read.schema(with_corrupt(source.schema)).options(**options).json(files)
    corrupt = F.col(CORRUPT_COLUMN)
    # A corrupt record whose line is not one whole object (`JsonFileProof.brokenObject`) has no values, as in the
    # line parse; judged in its own projection, once per row and only for corrupt records.
    broken = corrupt.isNotNull() & (json_line_shape(corrupt, source.schema.names) == NOT_ONE_OBJECT)
    # The file's path is taken in the projection over the scan, where the scan's current file is the row's
    # (anchored on a declared column: Spark refuses a query reading only `_corrupt_record`).
    path = landed_file_path(named_column(source.schema.names[0]).isNull())
    judged = read.select("*", F.coalesce(broken, F.lit(False)).alias("_broken"), path.alias("_source_file"))
    whole = ~F.col("_broken")
    typed = judged.select(
        *[F.when(whole, named_column(f.name)).alias(f.name) for f in source.schema.fields],
        CORRUPT_COLUMN,
        "_source_file",
        "_broken",
    )
    # Only for a record with a value that did not convert (rare): `_rescued_data`.
    malformed = corrupt.isNotNull() & whole
    kept = {n: named_column(n) for n in source.schema.names}
    rescued = json_rescued(corrupt, source.schema.names, kept, {})
    return typed.select(
        *[named_column(n) for n in source.schema.names],
        CORRUPT_COLUMN,
        F.when(malformed, rescued).alias(RESCUED_COLUMN),
        "_source_file",
    )
