"""Daily partitions for day-partitioned gold tables, and the date ranges a partitioned run covers.

A spec gets daily partitions when its sink recomputes keys (`RecomputeMergeSink`) and its table is partitioned by
a date column: then one day is one partition, and a backfill of some days recomputes exactly those days. The
partitions start at the first day that holds data (recorded in the home by the runs that write such tables), so
the UI lists no months of empty partitions before the data; `TRIBUTARY_PARTITIONS_START` overrides it.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

from dagster import AssetExecutionContext, DailyPartitionsDefinition

from infra.home_record import first_day
from infra.settings import Settings


def partitions_start(settings: Settings) -> str:
    """The first daily partition: `TRIBUTARY_PARTITIONS_START`, else the home's first data day, else today."""
    if settings.partitions_start:
        return settings.partitions_start
    return (first_day(settings.home) or datetime.now(UTC).date()).isoformat()


def daily_partitions(settings: Settings) -> DailyPartitionsDefinition:
    """One partition per UTC day from `partitions_start` up to and including today.

    Today is included (end_offset=1) because the incremental runs keep the current day up to date as well.
    """
    return DailyPartitionsDefinition(start_date=partitions_start(settings), end_offset=1, timezone="UTC")


def partition_days(context: AssetExecutionContext) -> tuple[date, date]:
    """The first and last day of a partitioned run (one day, or a range from a single-run backfill)."""
    keys = context.partition_key_range
    return date.fromisoformat(keys.start), date.fromisoformat(keys.end)
