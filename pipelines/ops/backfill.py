"""Backfills: recompute days of a day-partitioned table from its upstream and replace exactly those days.

A backfill serves tables whose write strategy recomputes rows by key (`Sink.recomputes_by_key`, e.g. a gold
aggregate): the spec's own recompute function rebuilds each day, and the days are replaced in one commit,
so keys that no longer exist for a day disappear and other days are untouched.
"""

from __future__ import annotations

import functools
import time
from datetime import date
from typing import cast

from pyspark.sql import SparkSession
from pyspark.sql.types import DateType

from infra.errors import ConfigError
from infra.settings import Settings
from pipelines.io.formats import table_format
from pipelines.run import run_log
from pipelines.run.locks import table_lock
from pipelines.sources.kinds import prepare_tables
from pipelines.spec.tables import TableSpec
from pipelines.write.ranges import (
    RangeReport,
    check_range,
    day_column,
    day_range,
    days_of,
    replace_range,
    upstream_table,
)
from pipelines.write.sinks import RecomputeMergeSink


def backfillable_day_column(spec: TableSpec) -> str | None:
    """The date column whose days a backfill can replace in `spec`'s table (a day-partitioned table that recomputes
    by key), else None."""
    if not spec.sink.recomputes_by_key:
        return None
    try:
        column = day_column(spec.output)
    except ConfigError:
        return None
    return column if isinstance(spec.output.schema[column].dataType, DateType) else None


def backfill_days(spark: SparkSession, settings: Settings, spec: TableSpec, start: date, end: date) -> RangeReport:
    """Recompute the days start..end of a day-partitioned recompute-and-merge table and replace exactly those days."""
    with table_lock(settings, spec.name, settings.lock_wait_seconds):
        work = functools.partial(_backfill_days, spark, settings, spec, start, end)
        return run_log.logged_operation(settings, spec.name, "backfill", work)


def _backfill_days(spark: SparkSession, settings: Settings, spec: TableSpec, start: date, end: date) -> RangeReport:
    check_range(spec.name, start, end)
    if not spec.sink.recomputes_by_key:
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
    upstream_table(spark, fmt, spec)
    days = day_range(spec.output, column, start, end)
    condition = days.condition()
    report = RangeReport(spec.name, "backfill", start, end)
    report.rows_before = fmt.read(spark, spec.name).filter(condition).count()
    rows = (
        cast(RecomputeMergeSink, spec.sink)
        .recompute(spark, fmt, [{column: day} for day in days_of(start, end)])
        .filter(condition)
    )
    # Days without rows before or after (a partition before the data starts) need no commit: an empty overwrite
    # would add a snapshot that changes nothing, and the report says nothing was written (snapshot_id None).
    if report.rows_before or not rows.isEmpty():
        report.snapshot_id = replace_range(fmt, spec.output, rows, days, "backfill")
        report.rows_after = fmt.read(spark, spec.name).filter(condition).count()
    report.seconds = round(time.perf_counter() - started, 3)
    return report
