"""Streaming sources: landed files (checked, then parsed by `pipelines.io.landing_parse`) and upstream tables.

JSON lines and CSV are read as text, one row per non-blank line: a line is one record, so a line holding a
JSON array, binary garbage or bytes that are not UTF-8 becomes exactly one corrupt record, and landed lines =
bronze rows per file. Spark's own JSON reader would split an array into several rows and split garbage at
carriage returns; its CSV reader would map columns by position.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamReader

from infra.errors import ConfigError, PipelineError
from infra.paths import canonical_all, local_path, misnamed_compression, open_landed
from infra.settings import Settings
from infra.spark_functions import batch_time
from pipelines.io import csv_reader, file_ledger, json_reader
from pipelines.io.checkpoints import pending_batch
from pipelines.io.file_source_log import seen_files
from pipelines.io.landing import is_landed_name, landed_paths, landing_folder
from pipelines.io.landing_parse import (
    CORRUPT_COLUMN,
    RESCUED_COLUMN,
    CsvHeaders,
    file_name,
    parse_csv_lines,
    parse_json_lines,
    read_csv_headers,
    with_corrupt,
)
from pipelines.io.landing_values import named_column
from pipelines.spec.sources import FileSource

LINEAGE_COLUMNS = ("_source_file", "_ingested_at")


def check_landing(settings: Settings, source: FileSource, table: str) -> list[Path]:
    """The landed files (none when the folder does not exist yet); fail naming a file that cannot be read."""
    folder = landing_folder(settings, source)
    if not folder.is_dir():
        return []  # nothing has landed yet
    with os.scandir(folder) as listed:
        entries = sorted((e for e in listed if is_landed_name(e.name)), key=lambda e: e.name)
    for entry in entries:
        path = Path(entry.path)
        if entry.is_symlink():
            # Spark would read whatever the link points to, inside the home or not (/etc/passwd).
            raise PipelineError(
                f"table {table}: landing file {path} is a symbolic link (to {os.readlink(path)}), which Tributary "
                "does not follow; copy the file into the landing folder under a new name and remove the link "
                "(nothing was written)"
            )
        if entry.is_file() and not os.access(path, os.R_OK):
            raise PipelineError(
                f"table {table}: landing file {path} is not readable (permission denied); fix its "
                "permissions or move it out of the landing folder"
            )
    return landed_paths(folder)


def landed_files(settings: Settings, source: FileSource) -> dict[str, Path]:
    """The landed files (`pipelines.io.landing`) by canonical path."""
    paths = landed_paths(landing_folder(settings, source))
    return dict(zip(canonical_all(str(p) for p in paths), paths, strict=True))


def check_landed_files(settings: Settings, source: FileSource, table: str, checkpoint: Path) -> dict[str, Path]:
    """Refuse, naming the file, a landing folder whose files Spark would misread or silently skip.

    - gzip data under a name without `.gz` would be read as garbage text;
    - a file of an uncommitted (planned) batch that is gone would make its replay fail;
    - a file already ingested whose content changed was replaced: Spark never reads a path twice, so its new
      content would be lost without a word (the same bytes dropped again are fine; see `pipelines.io.file_ledger`).
    Returns the landed files (canonical path → path) for `check_all_read` after the run.
    """
    files = landed_files(settings, source)
    pending = pending_batch(checkpoint)
    if not files and pending is None:
        return files
    ledger = file_ledger.load(checkpoint)
    for name, path in files.items():
        known = ledger.get(name)
        if known is not None and known.modified_ms == file_ledger.modified_ms(path):
            continue  # checked when it was ingested, and unchanged since
        compression = misnamed_compression(path)
        if compression:
            raise PipelineError(
                f"table {table}: landing file {path} holds {compression} data but its name does not end in .gz; "
                f"rename it to {path.name}.gz (nothing was written)"
            )
    seen = seen_files(checkpoint)
    before = dict(ledger)
    for entry in seen.values():
        path = files.get(entry.path)
        if entry.batch_id == pending:
            if path is None:
                raise PipelineError(
                    f"table {table}: landing file {entry.path} was planned into batch {pending}, which a crash "
                    "interrupted, and is gone; restore it and re-run (nothing of that batch was committed)"
                )
            continue
        if path is not None and not file_ledger.unchanged(ledger, entry, path):
            raise PipelineError(
                f"table {table}: landing file {path} was already ingested (batch {entry.batch_id}) and has been "
                "replaced since; landed files are immutable: move it out of the landing folder and land the new "
                "content under a new name (nothing was written)"
            )
    if ledger != before:
        file_ledger.save(checkpoint, ledger)
    return files


def check_all_read(table: str, landed: dict[str, Path], checkpoint: Path) -> None:
    """After a bounded run, every file that was landed when it started must have been read; fingerprint them."""
    if not landed:
        return
    seen = seen_files(checkpoint)
    ledger = file_ledger.load(checkpoint)
    recorded = len(ledger)
    file_ledger.record_unchanged(
        ledger, [(entry, landed[name]) for name, entry in seen.items() if name not in ledger and name in landed]
    )
    if len(ledger) != recorded:
        file_ledger.save(checkpoint, ledger)
    unread = sorted(set(landed) - set(seen))
    if unread:
        raise PipelineError(
            f"table {table}: {len(unread)} landed file(s) were not ingested, e.g. {landed[unread[0]]}; "
            "land it again under a new name (the stream's file log is in its checkpoint)"
        )


def find_unreadable_file(settings: Settings, source: FileSource) -> tuple[Path, str] | None:
    """The first landed file that cannot be read to the end, with the reason (used to explain a failed run)."""
    for path in landed_paths(landing_folder(settings, source)):
        try:
            if source.format == "parquet":
                pq.read_metadata(path)
                continue
            with open_landed(path) as fh:
                while fh.read(1 << 20):
                    pass
        except (OSError, EOFError, ValueError, pa.ArrowException) as exc:
            return path, f"{type(exc).__name__}: {exc}"
    return None


# Landed files are immutable and never expire: Spark's default maxFileAge (7 days) would silently skip a file
# whose modification time is older than that relative to the newest file seen.
NEVER_EXPIRE = "36500d"


def _reads_lines(source: FileSource) -> bool:
    """JSON lines and CSV are read as text and parsed per line (`pipelines.io.landing_parse`)."""
    return source.format in ("json", "csv") and dict(source.options).get("multiLine", "false").lower() != "true"


def file_reader_options(source: FileSource) -> dict[str, str]:
    """Options of the file reader itself (the stream's, and the batch re-read of `pipelines.ops.reprocess`).

    Lines are read with the text reader's default line ends, `\n`, `\r\n` and a lone `\r` (the rule Python's
    counts follow: `pipelines.io.landing.landed_lines`).
    """
    if _reads_lines(source):
        return {}
    options: dict[str, str] = {}
    if source.format == "json":
        options.update(mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT_COLUMN)
    options.update(dict(source.options))
    return options


def _reader(reader: DataFrameReader | DataStreamReader, source: FileSource) -> DataFrameReader | DataStreamReader:
    if _reads_lines(source):
        return reader.format("text").options(**file_reader_options(source))
    if source.format == "csv":
        raise ConfigError(f"dataset {source.dataset}: multi-line CSV is not supported; land one record per line")
    schema = with_corrupt(source.schema) if source.format == "json" else source.schema
    return reader.format(source.format).schema(schema).options(**file_reader_options(source))


def csv_headers(source: FileSource, paths: list[Path]) -> CsvHeaders | None:
    """The headers of the CSV files at `paths` (None for other formats)."""
    return read_csv_headers(source, paths) if source.format == "csv" and _reads_lines(source) else None


def parse_landed(df: DataFrame, source: FileSource, headers: CsvHeaders | None) -> DataFrame:
    """Typed rows with `_corrupt_record` and `_rescued_data` from what `_reader` read (see `landing_parse`)."""
    if _reads_lines(source):
        if source.format == "csv":
            return parse_csv_lines(df, source, headers or CsvHeaders())
        return parse_json_lines(df, source)
    missing = [n for n in (CORRUPT_COLUMN, RESCUED_COLUMN) if n not in df.columns]
    metadata = [] if "_metadata" in df.columns else ["_metadata"]  # a micro-batch of `read_files` holds it
    return df.select("*", *[F.lit(None).cast("string").alias(n) for n in missing], *metadata)


def batch_read_files(spark: SparkSession, source: FileSource, files: list[str]) -> DataFrame:
    """A batch read of some landed files, parsed exactly as the stream parses them (with `_source_file`)."""
    paths: list[Path] = []
    for local in (local_path(f) for f in files):
        if local is not None:
            paths.extend(sorted(p for p in local.iterdir() if p.is_file()) if local.is_dir() else [local])
    df = parse_landed(_reader(spark.read, source).load(files), source, csv_headers(source, paths))
    return df.withColumn("_source_file", F.col("_metadata.file_path")).drop("_metadata", "_layout")


def prove_ahead(
    spark: SparkSession, source: FileSource, landed: dict[str, Path] | None, checkpoint: Path
) -> json_reader.ProofAhead | None:
    """Start proving which of the `landed` files not read yet Spark's JSON reader reads alike
    (`json_reader.ProofAhead`); None for a source the JSON reader does not read."""
    if not landed or not _reads_lines(source) or not json_reader.reader_applies(source):
        return None
    seen = seen_files(checkpoint)
    return json_reader.ProofAhead(spark, source, [path for name, path in landed.items() if name not in seen])


class ReaderBatch(NamedTuple):
    """A micro-batch read by Spark's own reader (`read_batch_by_reader`)."""

    frame: DataFrame
    # How many of the batch's files the reader reads.
    files: int
    # The records of each of the batch's files (as the batch names them), when the reader reads them all and its
    # proof counted them (JSON); else None.
    records: dict[str, int] | None = None


def read_batch_by_reader(
    spark: SparkSession,
    source: FileSource,
    headers: CsvHeaders | None,
    files: list[str],
    lines: Callable[[], DataFrame],
    ingested_at: datetime,
    ahead: json_reader.ProofAhead | None = None,
) -> ReaderBatch | None:
    """One micro-batch of landed files (`files`) read by Spark's own CSV or JSON reader where it reads them exactly
    as the line parse does (`pipelines.io.csv_reader`, `pipelines.io.json_reader`; JSON files proved `ahead` are
    not proved again); the other files' rows are taken from `lines()`, the batch parsed per line (`parse_batch`),
    built only then. None when no file qualifies: then `lines()` is the batch. Rows are stamped `ingested_at`."""
    if not _reads_lines(source):
        return None
    records: dict[str, int] | None = None
    if json_reader.reader_applies(source):
        records, rest = json_reader.split_files(spark, source, files, ahead)
        alike = list(records)
        frames = [json_reader.read_json_files(spark, source, alike)] if alike else []
    elif headers is not None and csv_reader.reader_applies(source):
        by_layout, rest = csv_reader.split_files(spark, headers, files)
        alike = [path for paths in by_layout.values() for path in paths]
        frames = [csv_reader.read_layout(spark, source, headers.layouts[i], paths) for i, paths in by_layout.items()]
    else:
        return None
    if not frames:
        return None
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    out = _stamped(out, source, ingested_at)
    if rest:
        names = [Path(f).name for f in rest]
        out = out.unionByName(lines().drop("_layout").filter(file_name(F.col("_source_file")).isin(names)))
    return ReaderBatch(out, len(alike), None if rest else records)


def read_files(spark: SparkSession, settings: Settings, source: FileSource) -> DataFrame:
    """A streaming DataFrame over the landing folder: the files as read (lines, for a source parsed per line), with
    `_metadata` as a column. A micro-batch is parsed (`parse_batch`) only when Spark's own reader does not read its
    files (`read_batch_by_reader`): building the line parse's plan takes a few hundred calls into the JVM (about
    0.3 s), and the query would plan it for every batch."""
    reader = _reader(spark.readStream, source).option("maxFileAge", NEVER_EXPIRE)
    if source.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", str(source.max_files_per_trigger))
    return reader.load(str(landing_folder(settings, source))).select("*", "_metadata")


def parse_batch(df: DataFrame, source: FileSource, headers: CsvHeaders | None, ingested_at: datetime) -> DataFrame:
    """A micro-batch of `read_files` parsed (`parse_landed`), with lineage columns `_source_file` and
    `_ingested_at` (the batch's `ingested_at`, see `infra.spark_functions.batch_time`).

    CSV rows are matched to columns by the `headers` read when the run started (`csv_headers`).
    """
    df = parse_landed(df, source, headers)
    df = _stamped(df.withColumn("_source_file", F.col("_metadata.file_path")), source, ingested_at)
    return df.drop("_metadata")


def _stamped(df: DataFrame, source: FileSource, ingested_at: datetime) -> DataFrame:
    # (Anchored on a declared column: Spark refuses a query reading only `_corrupt_record`.)
    anchor = named_column(source.schema.names[0]).isNull()
    return df.withColumn("_ingested_at", batch_time(df.sparkSession, ingested_at, anchor))
