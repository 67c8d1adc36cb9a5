"""Reprocessing a validated table (`pipelines.ops.reprocess`): the upstream rows whose event time falls on the
range's days are validated and deduplicated again, and replace those days and their quarantined rows."""

from __future__ import annotations

from typing import cast

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from infra.errors import ConfigError, PipelineError
from pipelines.io.formats import DayRange, Merge, TableFormat
from pipelines.spec.tables import TableSpec
from pipelines.write.ranges import RangeReport, replace_range, upstream_table
from pipelines.write.validate import QUARANTINE_IDENTITY, ValidateDedupeSink, quarantine_identity

# `_batch_id` of rows written by a reprocess rather than by a streaming batch.
REPROCESS_BATCH_ID = -1
# Quarantine columns that a reprocess assigns anew; the others identify the upstream row a quarantined row came from.
_ASSIGNED_QUARANTINE_COLUMNS = ("reasons", "_batch_id")


def revalidate(spark: SparkSession, fmt: TableFormat, spec: TableSpec, days: DayRange, report: RangeReport) -> None:
    """Replace the days of `days` with the upstream rows of those days, validated and deduplicated again."""
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
    # Matched on the record as the quarantine stores it (text), rendered for the rejected rows only.
    gone = batch.select(
        *[quarantine_identity(batch).alias(c) if c == QUARANTINE_IDENTITY else F.col(c) for c in identity]
    ).distinct()
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
