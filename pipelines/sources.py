"""Streaming sources: landed files with explicit schemas and corrupt-record capture, and upstream tables."""

from __future__ import annotations

import bz2
import gzip
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from infra.errors import PipelineError
from infra.settings import Settings
from pipelines.formats import TableFormat
from pipelines.registry import FileSource, TableSource

CORRUPT_COLUMN = "_corrupt_record"
LINEAGE_COLUMNS = ("_source_file", "_ingested_at")


def landing_folder(settings: Settings, source: FileSource) -> Path:
    """The folder a file source reads."""
    return settings.landing / source.dataset


def check_landing(settings: Settings, source: FileSource, table: str) -> list[Path]:
    """Fail with a clear message if the landing folder is missing or a landed file cannot be read."""
    folder = landing_folder(settings, source)
    if not folder.is_dir():
        raise PipelineError(
            f"table {table}: landing folder {folder} does not exist; create it or land files with "
            "'tributary generate' (TRIBUTARY_LANDING sets the landing root)"
        )
    files = sorted(p for p in folder.iterdir() if not p.name.startswith((".", "_")))
    for path in files:
        if path.is_symlink() and not path.exists():
            raise PipelineError(
                f"table {table}: landing file {path} is a broken link (to {os.readlink(path)}); "
                "restore its target or remove the link"
            )
        if path.is_file() and not os.access(path, os.R_OK):
            raise PipelineError(
                f"table {table}: landing file {path} is not readable (permission denied); fix its "
                "permissions or move it out of the landing folder"
            )
    return [p for p in files if p.is_file()]


_OPENERS = {".gz": gzip.open, ".bz2": bz2.open}


def find_unreadable_file(settings: Settings, source: FileSource) -> tuple[Path, str] | None:
    """The first landed file that cannot be read to the end, with the reason (used to explain a failed run)."""
    for path in sorted(landing_folder(settings, source).glob("*")):
        if path.name.startswith((".", "_")) or not path.is_file():
            continue
        try:
            if source.format == "parquet":
                pq.read_metadata(path)
                continue
            with _OPENERS.get(path.suffix, open)(path, "rb") as fh:
                while fh.read(1 << 20):
                    pass
        except (OSError, EOFError, ValueError, pa.ArrowException) as exc:
            return path, f"{type(exc).__name__}: {exc}"
    return None


def file_read_schema(source: FileSource) -> StructType:
    """The source schema plus the corrupt-record column for text formats."""
    if source.format == "parquet":
        return source.schema
    return StructType([*source.schema.fields, StructField(CORRUPT_COLUMN, StringType(), True)])


def file_reader_options(source: FileSource) -> dict[str, str]:
    """Reader options of a file source (corrupt-record capture, CSV header, the spec's own options).

    Shared by the incremental stream and the batch re-read of `pipelines.reprocess`, so both parse alike.
    """
    options: dict[str, str] = {}
    if source.format in ("json", "csv"):
        options.update(mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT_COLUMN)
    if source.format == "csv":
        options["header"] = "true"
    options.update(dict(source.options))
    return options


def read_files(spark: SparkSession, settings: Settings, source: FileSource, table: str) -> DataFrame:
    """A streaming DataFrame over the landing folder with lineage columns `_source_file`, `_ingested_at`."""
    check_landing(settings, source, table)
    reader = spark.readStream.format(source.format).schema(file_read_schema(source))
    reader = reader.options(**file_reader_options(source))
    if source.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", str(source.max_files_per_trigger))
    df = reader.load(str(landing_folder(settings, source)))
    return df.withColumn("_source_file", F.col("_metadata.file_path")).withColumn("_ingested_at", F.current_timestamp())


def read_table(spark: SparkSession, fmt: TableFormat, source: TableSource) -> DataFrame:
    """A streaming DataFrame over the appends of an upstream Iceberg table.

    Overwrite and delete snapshots are skipped: only a reprocess or a backfill (`pipelines.reprocess`) makes
    them, replacing rows the stream has already carried downstream, so re-reading them would add them twice.
    """
    return (
        spark.readStream.format("iceberg")
        .option("streaming-skip-overwrite-snapshots", "true")
        .option("streaming-skip-delete-snapshots", "true")
        .load(fmt.qualified(source.table))
    )
