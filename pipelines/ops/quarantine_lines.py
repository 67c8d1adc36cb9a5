"""The landed lines of quarantined rows, byte for byte (`tributary quarantine export`).

A quarantine table's `raw_record` identifies a rejected row: the line itself for a line that could not be read,
otherwise the landed fields as JSON, in Spark's rendering of the values it read (`"amount":1E2` is `100.00` there,
`-0.0` is `0.00`). A person who fixes rejected rows and lands them again wants their own bytes back, so they are
looked up only when asked, not kept for every row on every run: the landed files the rows came from (in the
landing folder, or the archive once moved there) are read again as text and parsed exactly as the bronze stream
parses them; a line whose `raw_record` is a quarantined row's, in that row's file, is one of its landed lines.
Every such line is exported: two lines with other bytes but the same values were both rejected by the same rules.

A quarantined row is not found when its file is gone (deleted, or beyond the archive) or when the bronze table
changed its values (an author's function on bronze); the result says how many.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField

from infra.errors import ConfigError
from infra.paths import local_path
from infra.settings import Settings
from pipelines.io.archive import archived_path
from pipelines.io.formats import table_format
from pipelines.io.landing import landing_folder
from pipelines.io.landing_parse import CORRUPT_COLUMN
from pipelines.io.sources import csv_headers, parse_landed
from pipelines.spec.registry import Registry
from pipelines.spec.sources import FileSource
from pipelines.spec.tables import TableSpec
from pipelines.write.validate import QUARANTINE_IDENTITY, ValidateDedupeSink

REASONS = "reasons"


@dataclass(frozen=True)
class Export:
    """What `export_landed_lines` wrote: lines per landed file name, and the quarantined records it did not find."""

    table: str
    folder: Path
    lines: dict[str, int]
    records: int
    not_found: int
    missing_files: tuple[str, ...]


def _dedupe_spec(registry: Registry, table: str) -> TableSpec:
    for spec in registry:
        if isinstance(spec.sink, ValidateDedupeSink) and spec.sink.quarantine_table == table:
            return spec
    known = sorted(s.sink.quarantine_table for s in registry if isinstance(s.sink, ValidateDedupeSink))
    raise ConfigError(f"{table} is not a quarantine table; the quarantine tables are: {', '.join(known) or 'none'}")


def _landed_source(registry: Registry, spec: TableSpec) -> tuple[FileSource, str | None]:
    """The landed-files source whose lines the dedupe table validated, and the table that holds them as read
    (None when the dedupe table reads the files itself)."""
    if spec.source.keeps_file_health:
        return cast(FileSource, spec.source), None
    upstream = registry.get(spec.upstream) if spec.upstream else None
    if upstream is not None and upstream.source.keeps_file_health:
        return cast(FileSource, upstream.source), upstream.name
    raise ConfigError(
        f"{spec.sink.quarantine_table}: its rows did not come from landed files ({spec.name} reads "
        f"{spec.upstream or 'no table'}), so there are no landed lines to export; raw_record holds each record"
    )


def _readable(settings: Settings, source: FileSource, uri: str) -> Path | None:
    """The file a quarantined row's `_source_file` names, as it is now: landed, archived, or gone (None)."""
    path = local_path(uri)
    if path is None:
        return None
    return path if path.is_file() else archived_path(settings, source, path)


def _identity(lines: DataFrame, business: list[StructField]) -> Column:
    """`raw_record` as the dedupe table rendered it (`pipelines.write.validate.quarantine_identity`): the corrupt
    line, else the landed fields, in the order and types of the table that held them, as JSON."""
    fields = [
        (F.col(f.name) if f.name in lines.columns else F.lit(None)).cast(f.dataType).alias(f.name) for f in business
    ]
    return F.coalesce(F.col(CORRUPT_COLUMN), F.to_json(F.struct(*fields)))


def export_landed_lines(
    spark: SparkSession, settings: Settings, registry: Registry, table: str, folder: Path, reason: str | None = None
) -> Export:
    """Write to `folder`, per landed file, the exact landed lines of the rows of the quarantine `table` (only those
    that failed the rule `reason`, if given), in their file's order, one per line."""
    spec = _dedupe_spec(registry, table)
    source, bronze = _landed_source(registry, spec)
    if source.format not in ("json", "csv") or dict(source.options).get("multiLine", "false").lower() == "true":
        raise ConfigError(
            f"{table}: dataset {source.dataset} lands {source.format} files, not lines; raw_record holds each record"
        )
    target = folder.resolve()
    if target == landing_folder(settings, source).resolve():
        raise ConfigError(
            f"{target} is the landing folder of {source.dataset}: export to another folder, fix the lines there, "
            "then land them"
        )
    if target.exists() and any(target.iterdir()):
        raise ConfigError(f"{target} is not empty: choose a new or empty folder for the exported lines")
    fmt = table_format(settings)
    rows = fmt.read(spark, table)
    if reason is not None:
        rows = rows.filter(F.array_contains(REASONS, reason))
    records = rows.select("_source_file", QUARANTINE_IDENTITY).distinct().cache()
    try:
        return _export(spark, settings, table, source, bronze, records, target)
    finally:
        records.unpersist()


def _export(
    spark: SparkSession,
    settings: Settings,
    table: str,
    source: FileSource,
    bronze: str | None,
    records: DataFrame,
    target: Path,
) -> Export:
    uris = sorted(r._source_file for r in records.select("_source_file").distinct().collect() if r._source_file)
    readable = {uri: path for uri in uris if (path := _readable(settings, source, uri)) is not None}
    total = records.count()
    if not readable:
        return Export(table, target, {}, total, total, tuple(uris))
    held = table_format(settings).read(spark, bronze).schema if bronze else None
    fields = held.fields if held is not None else source.schema.fields
    business = [f for f in fields if not f.name.startswith("_")]
    # The parse passes `_metadata` through whole: the line's bytes and its place in the file ride along in it.
    text = spark.read.format("text").load([str(p) for p in readable.values()]).select("value", "_metadata")
    landed_as = F.create_map(*[F.lit(x) for uri, path in readable.items() for x in (str(path.name), uri)])
    text = text.withColumn(
        "_metadata",
        F.struct(
            F.col("_metadata.file_path").alias("file_path"),
            F.col("_metadata.file_name").alias("file_name"),
            F.col("value").cast("binary").alias("bytes"),
            F.monotonically_increasing_id().alias("position"),
        ),
    )
    parsed = parse_landed(text, source, csv_headers(source, list(readable.values())))
    lines = parsed.select(
        landed_as[F.col("_metadata.file_name")].alias("_source_file"),
        _identity(parsed, business).alias(QUARANTINE_IDENTITY),
        F.col("_metadata.bytes").alias("bytes"),
        F.col("_metadata.position").alias("position"),
    )
    matched = lines.join(records, ["_source_file", QUARANTINE_IDENTITY], "left_semi")
    target.mkdir(parents=True, exist_ok=True)
    written: dict[str, int] = {}
    found: set[tuple[str, str]] = set()  # the records whose lines were written: the files are parsed once
    handles: dict[str, BinaryIO] = {}
    try:
        for row in matched.orderBy("_source_file", "position").toLocalIterator():
            name = cast(str, row._source_file).rsplit("/", 1)[-1]
            if name not in handles:
                handles[name] = (target / name).open("xb")
            handles[name].write(bytes(row.bytes) + b"\n")
            written[name] = written.get(name, 0) + 1
            found.add((row._source_file, row[QUARANTINE_IDENTITY]))
    finally:
        for handle in handles.values():
            handle.close()
    missing = tuple(uri for uri in uris if uri not in readable)
    return Export(table, target, written, total, total - len(found), missing)
