"""Daily partitions for day-partitioned gold tables, and the date ranges a partitioned run covers.

A spec gets daily partitions when its sink recomputes keys (`RecomputeMergeSink`) and its table is partitioned by
a date column: then one day is one partition, and a backfill of some days recomputes exactly those days.
"""

from __future__ import annotations

from datetime import date

from dagster import AssetExecutionContext, DailyPartitionsDefinition

from infra.settings import Settings


def daily_partitions(settings: Settings) -> DailyPartitionsDefinition:
    """One partition per UTC day from `TRIBUTARY_PARTITIONS_START` up to and including today.

    Today is included (end_offset=1) because the incremental runs keep the current day up to date as well.
    """
    return DailyPartitionsDefinition(start_date=settings.partitions_start, end_offset=1, timezone="UTC")


def partition_days(context: AssetExecutionContext) -> tuple[date, date]:
    """The first and last day of a partitioned run (one day, or a range from a single-run backfill)."""
    keys = context.partition_key_range
    return date.fromisoformat(keys.start), date.fromisoformat(keys.end)
