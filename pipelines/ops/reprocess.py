"""Reprocessing: re-derive a range of days of a streaming table from its input and replace it in one commit.

The table's write strategy says how (`Sink.reprocess_by`): a bronze table (landed files, appended) re-reads the
landing files it ingested on those days, keeping each file's original `_ingested_at` and batch id; a silver table
(validated and deduplicated) re-validates the upstream rows whose event time falls on those days, and replaces
their quarantined rows too. The table's checkpoint is left alone: it still points after everything the stream has
read, so the next incremental run neither re-adds nor skips rows. The commit is an *overwrite*, which
downstream streams skip (`TableFormat.read_stream`): recompute downstream days with a backfill.
"""

from __future__ import annotations

import time
from datetime import date
from typing import cast

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from infra.errors import ConfigError, PipelineError
from infra.paths import local_path
from infra.settings import Settings
from pipelines.io.archive import archived_path
from pipelines.io.formats import DayRange, Merge, TableFormat, table_format
from pipelines.io.landing_parse import REJECTED_COLUMN, file_name
from pipelines.io.sources import LINEAGE_COLUMNS, batch_read_files
from pipelines.ops.ranges import RangeReport, check_range, day_column, day_range, replace_range, upstream_table
from pipelines.run.locks import table_lock
from pipelines.sources.kinds import prepare_tables
from pipelines.spec.registry import Registry
from pipelines.spec.sources import FileSource
from pipelines.spec.tables import TableSpec
from pipelines.write.sinks import AppendSink, ValidateDedupeSink

# `_batch_id` of rows written by a reprocess rather than by a streaming batch.
REPROCESS_BATCH_ID = -1
# Quarantine columns that a reprocess assigns anew; the others identify the upstream row a quarantined row came from.
_ASSIGNED_QUARANTINE_COLUMNS = ("reasons", "_batch_id")


def reprocess(
    spark: SparkSession, settings: Settings, registry: Registry, table: str, start: date, end: date
) -> RangeReport:
    """Re-derive the days start..end of a streaming table from its input and replace them; checkpoints stay as they are.

    Bronze (a file source): the landing files whose rows were ingested on those days are read again, keeping each
    file's original `_ingested_at` and batch id. Silver (a table source validated and deduplicated by key): the
    upstream rows whose event time falls on those days are validated and deduplicated again; their quarantined
    rows are replaced too.
    """
    with table_lock(settings, table, settings.lock_wait_seconds):
        return _reprocess(spark, settings, registry, table, start, end)


def _reprocess(
    spark: SparkSession, settings: Settings, registry: Registry, table: str, start: date, end: date
) -> RangeReport:
    spec = registry.get(table)
    check_range(table, start, end)
    column = day_column(spec.output)
    fmt = table_format(settings)
    prepare_tables(spark, fmt, spec)
    started = time.perf_counter()
    days = day_range(spec.output, column, start, end)
    report = RangeReport(spec.name, "reprocess", start, end)
    report.rows_before = fmt.read(spark, spec.name).filter(days.condition()).count()
    how = spec.sink.reprocess_by
    if how == "reread_files" and spec.source.landing_folder_name() is not None:
        _reprocess_files(spark, settings, fmt, spec, days, report)
    elif how == "revalidate" and spec.source.streamed_table() is not None:
        _reprocess_validated(spark, fmt, spec, days, report)
    else:
        raise ConfigError(
            f"table {table}: reprocess supports file-source tables with an AppendSink (bronze) and table-source "
            "tables with a ValidateDedupeSink (silver); backfill recompute-and-merge tables by day, or full-refresh "
            "(a Kafka-fed table is rebuilt from what its topics still retain)"
        )
    report.rows_after = fmt.read(spark, spec.name).filter(days.condition()).count()
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _reprocess_files(
    spark: SparkSession, settings: Settings, fmt: TableFormat, spec: TableSpec, days: DayRange, report: RangeReport
) -> None:
    source, sink = cast(FileSource, spec.source), cast(AppendSink, spec.sink)
    condition = days.condition()
    missing = [c for c in LINEAGE_COLUMNS if c not in spec.output.schema.names]
    if missing:
        raise ConfigError(f"table {spec.name}: reprocess needs the lineage columns {missing} in the table")
    per_file = (
        fmt.read(spark, spec.name)
        .filter(condition)
        .groupBy("_source_file")
        .agg(
            F.min("_ingested_at").alias("_ingested_at"),
            *([F.min(sink.batch_id_column).alias(sink.batch_id_column)] if sink.batch_id_column else []),
            # A file's rejection was decided when it was first read; a re-read keeps it.
            *([F.first(REJECTED_COLUMN).alias(REJECTED_COLUMN)] if REJECTED_COLUMN in spec.output.schema.names else []),
        )
    )
    files = [r._source_file for r in per_file.collect()]
    reads, archived = [], {}
    for uri in files:
        path = local_path(uri)
        if path is not None and not path.is_file():
            copy = archived_path(settings, source, path)
            if copy is None:
                raise PipelineError(
                    f"table {spec.name}: cannot reprocess {report.start}..{report.end}: landing file {path}, "
                    "ingested in that range, no longer exists; restore it or choose a range that does not include it"
                )
            archived[copy.name] = uri
            uri = str(copy)
        reads.append(uri)
    report.extra["files_reread"] = len(files)
    if not files:
        rows = spark.createDataFrame([], spec.output.schema)
    else:
        read = batch_read_files(spark, source, reads)
        if archived:  # rows keep the landing path they were first read from
            landed_as = F.create_map(*[F.lit(x) for item in archived.items() for x in item])
            read = read.withColumn(
                "_source_file", F.coalesce(landed_as[file_name(F.col("_source_file"))], F.col("_source_file"))
            )
        rows = spec.transform(read.join(F.broadcast(per_file), "_source_file")).filter(condition)
    report.snapshot_id = replace_range(fmt, spec.output, rows, days, "reprocess")


def _reprocess_validated(
    spark: SparkSession, fmt: TableFormat, spec: TableSpec, days: DayRange, report: RangeReport
) -> None:
    sink = cast(ValidateDedupeSink, spec.sink)
    column, condition = days.column, days.condition()
    if sink.time_column != column:
        # The days select upstream rows by event time: the table's days must be those of the same column.
        raise ConfigError(
            f"table {spec.name}: reprocess needs the table partitioned by days({sink.time_column}), "
            f"the column its duplicates share, not by {column!r}"
        )
    batch = (
        spec.transform(upstream_table(spark, fmt, spec))
        .filter(condition)
        .withColumn("_batch_id", F.lit(REPROCESS_BATCH_ID).cast("long"))
        .persist()
    )
    try:
        stats = sink.stats(batch)
        failing = sink.failed_fail_rule(stats)
        if failing:
            rule, failed = failing
            raise PipelineError(
                f"table {spec.name}: rule {rule.name!r} ({rule.description or rule.expr}) failed for {failed} "
                f"row(s) between {report.start} and {report.end}; nothing was replaced"
            )
        report.extra["rows_read"] = stats["rows"]
        report.extra["rows_quarantined"] = stats["invalid"] or 0
        # A key stored on a day outside the range was there first: its copies inside the range stay duplicates.
        keys = list(sink.keys)
        outside = fmt.read(spark, spec.name).filter(~F.coalesce(condition, F.lit(False))).select(*keys)
        unique = sink.first_per_key(batch).join(outside, keys, "left_anti").select(*sink.output_columns)
        report.snapshot_id = replace_range(fmt, spec.output, unique, days, "reprocess")
        _replace_quarantined(fmt, sink, batch, sink.quarantine_rows(batch).select(*sink.quarantine_columns))
    finally:
        batch.unpersist()


def _replace_quarantined(fmt: TableFormat, sink: ValidateDedupeSink, batch: DataFrame, quarantined: DataFrame) -> None:
    """In one MERGE: delete the quarantined rows that came from the re-read upstream rows, insert the new ones."""
    identity = [c for c in sink.quarantine_columns if c not in _ASSIGNED_QUARANTINE_COLUMNS]
    gone = batch.select(*identity).distinct()
    for name in _ASSIGNED_QUARANTINE_COLUMNS:
        gone = gone.withColumn(name, F.lit(None).cast(quarantined.schema[name].dataType))
    source = (
        gone.select(*sink.quarantine_columns)
        .withColumn("_op", F.lit("delete"))
        .unionByName(quarantined.withColumn("_op", F.lit("insert")))
    )
    merge = Merge(
        tuple(identity),
        null_safe_keys=True,
        match_when="s._op = 'delete'",
        delete_when="TRUE",
        update=False,
        insert_when="s._op = 'insert'",
        columns=sink.quarantine_columns,
    )
    fmt.merge(source, sink.quarantine_table, merge)
