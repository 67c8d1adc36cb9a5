"""Rewriting a range of days of a table in batch, and rebuilding tables from scratch (pure Spark).

- `backfill_days` recomputes days of a day-partitioned table fed by a `RecomputeMergeSink` (gold) from its
  upstream, with the spec's own recompute function, and replaces exactly those days in one Iceberg commit: keys
  that no longer exist for a day disappear, other days are untouched.
- `reprocess` re-reads a range of days of a streaming table's input in batch (the landing files a bronze table
  ingested on those days; the upstream rows whose event time falls on those days for a silver table), applies the
  spec's transform, rules and deduplication, and replaces that range in one commit. The table's checkpoint is left
  alone: it still points after everything the stream has read, so the next incremental run neither re-adds nor
  skips rows. The commit is an Iceberg *overwrite*, which downstream streams skip (`pipelines.io.sources.read_table`):
  recompute downstream days with a backfill.
- `full_refresh` drops a table, every table downstream of it, and their checkpoints, then rebuilds them all with
  incremental runs from the start.

Every replacement is a single Iceberg commit, so a failure leaves the table as it was before the operation.
"""

from __future__ import annotations

import re
import shutil
import time
import uuid
from collections.abc import Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, TimestampNTZType, TimestampType

from infra.errors import ConfigError, PipelineError
from infra.paths import local_path
from infra.settings import Settings
from pipelines.io.formats import TableFormat, table_format
from pipelines.io.landing_parse import REJECTED_COLUMN
from pipelines.io.sources import LINEAGE_COLUMNS, batch_read_files
from pipelines.run.locks import table_lock
from pipelines.run.runner import RunReport, prepare_tables, run_table
from pipelines.spec.registry import Registry
from pipelines.spec.rules import REASONS_COLUMN, rule_failure_counts
from pipelines.spec.tables import FileSource, OutputTable, TableSource, TableSpec
from pipelines.write.sinks import AppendSink, RecomputeMergeSink, ValidateDedupeSink

# `_batch_id` of rows written by a reprocess rather than by a streaming batch.
REPROCESS_BATCH_ID = -1
OPERATION_PROPERTY = "tributary.operation"
OPERATION_ID_PROPERTY = "tributary.operation-id"
# Quarantine columns that a reprocess assigns anew; the others identify the upstream row a quarantined row came from.
_ASSIGNED_QUARANTINE_COLUMNS = ("reasons", "_batch_id")
_DAYS = re.compile(r"^days\(\s*([a-z_][a-z0-9_]*)\s*\)$")
_COLUMN = re.compile(r"^[a-z_][a-z0-9_]*$")


@dataclass
class RangeReport:
    """What a backfill or reprocess did to one table's range of days."""

    table: str
    operation: str
    start: date
    end: date
    rows_before: int = 0
    rows_after: int = 0
    seconds: float = 0.0
    snapshot_id: int | None = None
    extra: dict[str, int] = field(default_factory=dict)

    def numbers(self) -> dict[str, Any]:
        """The report as flat numbers (Dagster metadata, benchmarks)."""
        return {
            "operation": self.operation,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "days": (self.end - self.start).days + 1,
            "range_rows_before": self.rows_before,
            "range_rows_after": self.rows_after,
            "seconds": self.seconds,
            "snapshot_id": str(self.snapshot_id),
            **self.extra,
        }


def day_column(out: OutputTable) -> str:
    """The column whose days partition `out`: `days(col)` on a timestamp, or an identity partition on a date."""
    for item in out.partition_by:
        text = item.strip().lower()
        match = _DAYS.match(text)
        if match:
            return match.group(1)
        if _COLUMN.match(text) and text in out.schema.names and isinstance(out.schema[text].dataType, DateType):
            return text
    raise ConfigError(
        f"table {out.name!r} is not partitioned by day (partition_by={list(out.partition_by)}); only tables "
        "partitioned by days(<timestamp>) or by a date column can be backfilled or reprocessed by date range"
    )


def check_range(table: str, start: date, end: date) -> None:
    """Fail naming the table when the range is empty."""
    if end < start:
        raise ConfigError(f"table {table}: date range end {end} is before its start {start}")


def range_condition(out: OutputTable, column: str, start: date, end: date) -> Column:
    """Rows of `out` whose `column` falls on the days start..end (inclusive; UTC days for timestamps)."""
    dtype = out.schema[column].dataType
    if isinstance(dtype, DateType):
        return F.col(column).between(F.lit(start), F.lit(end))
    if not isinstance(dtype, TimestampType | TimestampNTZType):
        raise ConfigError(f"table {out.name!r}: column {column!r} is {dtype.simpleString()}, not a date or timestamp")
    lo = datetime.combine(start, datetime.min.time())
    hi = datetime.combine(end + timedelta(days=1), datetime.min.time())
    return (F.col(column) >= F.lit(lo)) & (F.col(column) < F.lit(hi))


def _replace_range(
    spark: SparkSession, fmt: TableFormat, out: OutputTable, rows: DataFrame, condition: Column, operation: str
) -> int | None:
    """Delete the rows matching `condition` and append `rows`, in one Iceberg commit; return its snapshot id.

    The condition follows the table's day partitions, so Iceberg drops whole files (no row-level rewrite).
    """
    qualified = fmt.qualified(out.name)
    op_id = uuid.uuid4().hex
    (
        rows.select(*out.schema.names)
        .writeTo(qualified)
        .option(f"snapshot-property.{OPERATION_PROPERTY}", operation)
        .option(f"snapshot-property.{OPERATION_ID_PROPERTY}", op_id)
        .overwrite(condition)
    )
    return _snapshot_of(spark, qualified, op_id)


def _snapshot_of(spark: SparkSession, qualified: str, op_id: str) -> int | None:
    found = spark.sql(
        f"SELECT snapshot_id FROM {qualified}.snapshots WHERE summary['{OPERATION_ID_PROPERTY}'] = :op",
        args={"op": op_id},
    ).collect()
    return found[0].snapshot_id if found else None


def _days(start: date, end: date) -> list[date]:
    return [start + timedelta(days=i) for i in range((end - start).days + 1)]


def _upstream(spark: SparkSession, fmt: TableFormat, spec: TableSpec) -> DataFrame:
    try:
        return spark.table(fmt.qualified(spec.upstream))
    except AnalysisException:
        raise PipelineError(
            f"table {spec.name}: its upstream table {spec.upstream} does not exist yet; run the pipeline first"
        ) from None


def backfill_days(spark: SparkSession, settings: Settings, spec: TableSpec, start: date, end: date) -> RangeReport:
    """Recompute the days start..end of a day-partitioned recompute-and-merge table and replace exactly those days."""
    with table_lock(settings, spec.name, settings.lock_wait_seconds):
        return _backfill_days(spark, settings, spec, start, end)


def _backfill_days(spark: SparkSession, settings: Settings, spec: TableSpec, start: date, end: date) -> RangeReport:
    check_range(spec.name, start, end)
    if not isinstance(spec.sink, RecomputeMergeSink):
        raise ConfigError(
            f"table {spec.name}: only tables written by a RecomputeMergeSink can be backfilled by day; "
            "reprocess streaming tables instead"
        )
    column = day_column(spec.output)
    if not isinstance(spec.output.schema[column].dataType, DateType):
        raise ConfigError(f"table {spec.name}: backfills need an identity partition on a date column, not {column!r}")
    started = time.perf_counter()
    fmt = table_format(settings)
    prepare_tables(spark, fmt, spec)
    _upstream(spark, fmt, spec)
    condition = range_condition(spec.output, column, start, end)
    report = RangeReport(spec.name, "backfill", start, end)
    report.rows_before = spark.table(fmt.qualified(spec.name)).filter(condition).count()
    rows = spec.sink.recompute(spark, fmt, [{column: day} for day in _days(start, end)]).filter(condition)
    report.snapshot_id = _replace_range(spark, fmt, spec.output, rows, condition, "backfill")
    report.rows_after = spark.table(fmt.qualified(spec.name)).filter(condition).count()
    report.seconds = round(time.perf_counter() - started, 3)
    return report


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
    condition = range_condition(spec.output, column, start, end)
    report = RangeReport(spec.name, "reprocess", start, end)
    report.rows_before = spark.table(fmt.qualified(spec.name)).filter(condition).count()
    if isinstance(spec.source, FileSource) and isinstance(spec.sink, AppendSink):
        _reprocess_files(spark, settings, fmt, spec, condition, report)
    elif isinstance(spec.source, TableSource) and isinstance(spec.sink, ValidateDedupeSink):
        _reprocess_validated(spark, fmt, spec, column, condition, report)
    else:
        raise ConfigError(
            f"table {table}: reprocess supports file-source tables with an AppendSink (bronze) and table-source "
            "tables with a ValidateDedupeSink (silver); backfill recompute-and-merge tables by day, or full-refresh"
        )
    report.rows_after = spark.table(fmt.qualified(spec.name)).filter(condition).count()
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _reprocess_files(
    spark: SparkSession, settings: Settings, fmt: TableFormat, spec: TableSpec, condition: Column, report: RangeReport
) -> None:
    source, sink = spec.source, spec.sink
    assert isinstance(source, FileSource) and isinstance(sink, AppendSink)
    missing = [c for c in LINEAGE_COLUMNS if c not in spec.output.schema.names]
    if missing:
        raise ConfigError(f"table {spec.name}: reprocess needs the lineage columns {missing} in the table")
    per_file = (
        spark.table(fmt.qualified(spec.name))
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
    for uri in files:
        path = local_path(uri)
        if path is not None and not path.is_file():
            raise PipelineError(
                f"table {spec.name}: cannot reprocess {report.start}..{report.end}: landing file {path}, ingested in "
                "that range, no longer exists; restore it or choose a range that does not include it"
            )
    report.extra["files_reread"] = len(files)
    if not files:
        rows = spark.createDataFrame([], spec.output.schema)
    else:
        read = batch_read_files(spark, source, files)
        rows = spec.transform(read.join(F.broadcast(per_file), "_source_file")).filter(condition)
    report.snapshot_id = _replace_range(spark, fmt, spec.output, rows, condition, "reprocess")


def _reprocess_validated(
    spark: SparkSession, fmt: TableFormat, spec: TableSpec, column: str, condition: Column, report: RangeReport
) -> None:
    sink = spec.sink
    assert isinstance(sink, ValidateDedupeSink)
    if sink.time_column != column:
        # Duplicates share key and event time: only a range on that time keeps each duplicate with its original.
        raise ConfigError(
            f"table {spec.name}: reprocess needs the table partitioned by days({sink.time_column}), "
            f"the column its duplicates share, not by {column!r}"
        )
    batch = (
        spec.transform(_upstream(spark, fmt, spec))
        .filter(condition)
        .withColumn("_batch_id", F.lit(REPROCESS_BATCH_ID).cast("long"))
        .persist()
    )
    try:
        is_valid = F.size(REASONS_COLUMN) == 0
        stats = batch.agg(
            F.count(F.lit(1)).alias("rows"),
            F.sum((~is_valid).cast("long")).alias("invalid"),
            *rule_failure_counts(sink.rules),
        ).collect()[0]
        for rule in sink.rules:
            failed = stats[f"rule:{rule.name}"] or 0
            if rule.action == "fail" and failed:
                raise PipelineError(
                    f"table {spec.name}: rule {rule.name!r} ({rule.description or rule.expr}) failed for {failed} "
                    f"row(s) between {report.start} and {report.end}; nothing was replaced"
                )
        order = Window.partitionBy(*sink.keys).orderBy(*sink.order_by)
        unique = batch.filter(is_valid).withColumn("_n", F.row_number().over(order)).filter("_n = 1")
        report.extra["rows_read"] = stats["rows"]
        report.extra["rows_quarantined"] = stats["invalid"] or 0
        report.snapshot_id = _replace_range(
            spark, fmt, spec.output, unique.select(*sink.columns), condition, "reprocess"
        )
        quarantined = batch.filter(~is_valid).withColumn("reasons", F.col(REASONS_COLUMN))
        _replace_quarantined(spark, fmt, sink, batch, quarantined.select(*sink.quarantine_columns))
    finally:
        batch.unpersist()


def _replace_quarantined(
    spark: SparkSession, fmt: TableFormat, sink: ValidateDedupeSink, batch: DataFrame, quarantined: DataFrame
) -> None:
    """In one MERGE: delete the quarantined rows that came from the re-read upstream rows, insert the new ones."""
    identity = [c for c in sink.quarantine_columns if c not in _ASSIGNED_QUARANTINE_COLUMNS]
    for name in sink.quarantine_columns:
        if not _COLUMN.match(name):
            raise ConfigError(f"quarantine column name {name!r} is not a valid identifier")
    gone = batch.select(*identity).distinct()
    for name in _ASSIGNED_QUARANTINE_COLUMNS:
        gone = gone.withColumn(name, F.lit(None).cast(quarantined.schema[name].dataType))
    source = (
        gone.select(*sink.quarantine_columns)
        .withColumn("_op", F.lit("delete"))
        .unionByName(quarantined.withColumn("_op", F.lit("insert")))
    )
    view = f"_tributary_requarantine_{uuid.uuid4().hex}"
    source.createOrReplaceTempView(view)
    try:
        match = " AND ".join(f"t.{c} <=> s.{c}" for c in identity)
        columns = ", ".join(sink.quarantine_columns)
        values = ", ".join(f"s.{c}" for c in sink.quarantine_columns)
        spark.sql(
            f"MERGE INTO {fmt.qualified(sink.quarantine_table)} t USING {view} s ON s._op = 'delete' AND {match} "
            f"WHEN MATCHED THEN DELETE WHEN NOT MATCHED AND s._op = 'insert' THEN INSERT ({columns}) VALUES ({values})"
        )
    finally:
        spark.catalog.dropTempView(view)


def downstream_closure(registry: Registry, tables: Iterable[str]) -> list[TableSpec]:
    """The specs of `tables` and every spec that reads them directly or indirectly, in registry order."""
    names = {registry.get(table).name for table in tables}
    chain = []
    for spec in registry:
        if spec.name in names or names.intersection(spec.upstreams):
            names.add(spec.name)
            chain.append(spec)
    return chain


def streamed_upstreams(spec: TableSpec) -> list[str]:
    """The registry tables `spec` reads as streams (its checkpoint holds positions in their histories)."""
    secondary = [s.table for s in spec.secondary_sources if isinstance(s, TableSource)]
    return ([spec.upstream] if spec.upstream else []) + secondary


def _check_replayable(spark: SparkSession, fmt: TableFormat, upstream: str, table: str) -> None:
    """A rebuilt stream replays the upstream's appends from its first snapshot: all of them must still be there."""
    qualified = fmt.qualified(upstream)
    try:
        snaps = spark.sql(f"SELECT snapshot_id, parent_id, operation FROM {qualified}.snapshots").collect()
    except AnalysisException:
        return  # no upstream table yet: the rebuilt stream starts when it appears
    ids = {s.snapshot_id for s in snaps}
    expired = [s for s in snaps if s.parent_id is not None and s.parent_id not in ids]
    rewritten = [s for s in snaps if s.operation in ("overwrite", "delete")]
    if expired or rewritten:
        why = (
            f"its snapshot history before {expired[0].snapshot_id} was expired"
            if expired
            else f"snapshot {rewritten[0].snapshot_id} {rewritten[0].operation} rows in place (a reprocess)"
        )
        raise PipelineError(
            f"cannot fully refresh {table}: a rebuilt stream replays every append of {upstream}, but {why}, so the "
            f"rebuild would not match {upstream}; full-refresh {upstream} instead (it rebuilds everything downstream)"
        )


def check_confirmation(table: str, confirm: str) -> None:
    """A full refresh goes ahead only when `confirm` repeats the table name."""
    if confirm != table:
        raise ConfigError(
            f"full refresh of {table} deletes its data and checkpoint and those of every table downstream; "
            f"set confirm to {table!r} to proceed (got {confirm!r})"
        )


def full_refresh(
    spark: SparkSession, settings: Settings, registry: Registry, table: str, confirm: str
) -> list[RunReport]:
    """Drop `table`, every table downstream of it and their checkpoints; rebuild them all from the start.

    `confirm` must equal `table`. Downstream tables are rebuilt too because their checkpoints point into the
    dropped table's history. Refused when a rebuilt table streams from a table outside the rebuild whose append
    history is incomplete.
    """
    check_confirmation(table, confirm)
    chain = downstream_closure(registry, [table])
    with ExitStack() as locks:
        for spec in chain:
            locks.enter_context(table_lock(settings, spec.name, settings.lock_wait_seconds))
        return _full_refresh(spark, settings, chain)


def _full_refresh(spark: SparkSession, settings: Settings, chain: list[TableSpec]) -> list[RunReport]:
    fmt = table_format(settings)
    rebuilt = {spec.name for spec in chain}
    for spec in chain:
        for upstream in streamed_upstreams(spec):
            if upstream not in rebuilt:
                _check_replayable(spark, fmt, upstream, spec.name)
    for spec in chain:
        for out in spec.outputs():
            spark.sql(f"DROP TABLE IF EXISTS {fmt.qualified(out.name)} PURGE")
        shutil.rmtree(settings.checkpoint_for(spec.name), ignore_errors=True)
    return [run_table(spark, settings, spec) for spec in chain]


def changed_days(spark: SparkSession, settings: Settings, out: OutputTable, since: datetime) -> list[date]:
    """Days of a date-partitioned table whose partition was last changed at or after `since` (read from metadata)."""
    column = day_column(out)
    rows = spark.sql(
        f"SELECT DISTINCT partition.{column} AS d FROM {table_format(settings).qualified(out.name)}.partitions "
        "WHERE last_updated_at >= :since",
        args={"since": since.astimezone(UTC).replace(tzinfo=None)},
    ).collect()
    return sorted(r.d for r in rows if r.d is not None)
