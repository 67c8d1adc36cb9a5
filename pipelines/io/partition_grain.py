"""How coarse a table's time partitions are: chosen from the data when the layout is a default, and day ranges
widened to whole partitions when a range of days is replaced.

The rule (docs/authoring.md, "partitioning"): a table partitioned by default by `days(<time>)`, or by a date
column of its upstream (a `recompute(by=<date>)` table), counts, when it is created, the distinct days of that
column in its upstream table. Up to `MAX_FIRST_PARTITIONS` days it stays as it is; up to that many distinct months
it becomes `months(<column>)`, beyond that `years(<column>)`. So a first load of two years of history writes 24
partitions, not 730, while a table that starts with today's data keeps one partition per day.
A `partition_by=` written by the author is never changed.

Ranges of days (backfill, reprocess, Dagster's daily partitions) stay ranges of days whatever the grain: replacing
days of a `months` table rewrites the whole months they fall in, in the same single commit, keeping the month's
other days as they were (`widened`).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from datetime import date, timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DateType

from infra.identifiers import COLUMN_PATTERN
from pipelines.io.format_types import DayRange

# A first load never creates more partitions than this by default.
MAX_FIRST_PARTITIONS = 100
_TIME_TRANSFORM = re.compile(rf"^(days|months|years)\(\s*({COLUMN_PATTERN})\s*\)$", re.IGNORECASE)


def time_transform(item: str) -> tuple[str, str] | None:
    """(`days`|`months`|`years`, column) of a partition item such as `months(ts)`, else None."""
    match = _TIME_TRANSFORM.match(item.strip())
    return (match.group(1).lower(), match.group(2)) if match else None


def described(partition_by: tuple[str, ...], grain_from: str | None, dates: Collection[str] = ()) -> str:
    """The partitioning as declared, saying when a default `days(...)` (or an identity partition on one of the
    date columns `dates`) may become coarser."""
    text = ", ".join(partition_by) or "none"
    if grain_from and any(item.strip().lower().startswith("days(") or item in dates for item in partition_by):
        text += f" (months or years when the first load holds more than {MAX_FIRST_PARTITIONS} days)"
    return text


def grain_for(days: int, months: int) -> str:
    """The finest grain at which data on `days` distinct days (in `months` distinct months) makes at most
    `MAX_FIRST_PARTITIONS` partitions."""
    if days <= MAX_FIRST_PARTITIONS:
        return "days"
    return "months" if months <= MAX_FIRST_PARTITIONS else "years"


def widened(days: DayRange, grain: str) -> DayRange:
    """`days` grown to whole partitions of `grain` (itself for `days`)."""
    if grain == "months":
        after = date(days.end.year + days.end.month // 12, days.end.month % 12 + 1, 1)
        return DayRange(days.column, days.start.replace(day=1), after - timedelta(days=1), days.timestamp)
    if grain == "years":
        return DayRange(days.column, date(days.start.year, 1, 1), date(days.end.year, 12, 31), days.timestamp)
    return days


def chosen_partitions(spark: SparkSession, partition_by: tuple[str, ...], upstream: str | None) -> tuple[str, ...]:
    """`partition_by` with each `days(<time>)`, and each identity partition on a date column of the (qualified)
    `upstream` table, coarsened by the days that column takes in `upstream` (one read of it, once, when the table
    is created); unchanged without an upstream, when the upstream lacks the column or holds no time yet. Distinct
    days rather than the span, so that one far-off time does not coarsen a table; they are counted only when the
    span is longer than `MAX_FIRST_PARTITIONS`. A layout that stays daily is kept as written."""
    if upstream is None or not spark.catalog.tableExists(upstream):
        return partition_by
    rows = spark.table(upstream)
    dates = {f.name for f in rows.schema.fields if isinstance(f.dataType, DateType)}
    chosen = []
    for item in partition_by:
        transform = time_transform(item)
        column = transform[1] if transform and transform[0] == "days" else item if item in dates else None
        if column is None or column not in rows.columns or _span_in_days(rows, column) <= MAX_FIRST_PARTITIONS:
            chosen.append(item)  # not a day layout of an upstream column, or no more days than the span: kept
            continue
        day = F.to_date(F.col(column)).alias("day")
        found = rows.select(day).where("day IS NOT NULL").distinct()
        counts = found.agg(F.count(F.lit(1)), F.countDistinct(F.trunc("day", "month"))).first()
        grain = grain_for(counts[0], counts[1]) if counts is not None and counts[0] else "days"
        chosen.append(item if grain == "days" else f"{grain}({column})")
    return tuple(chosen)


def _span_in_days(rows: DataFrame, column: str) -> int:
    """The calendar days from the first to the last day of `column`, both counted (0 when it holds no time): from
    its minimum and maximum, which Iceberg answers from its file statistics without reading the data."""
    bounds = rows.agg(F.min(column).alias("lo"), F.max(column).alias("hi"))
    span = bounds.select(F.datediff(F.to_date("hi"), F.to_date("lo")) + 1).first()
    return 0 if span is None or span[0] is None else int(span[0])


def table_grain(spark: SparkSession, qualified: str, column: str) -> str:
    """How coarse the Iceberg table's time partitions on `column` are now (`days` for an identity date)."""
    for row in spark.sql(f"DESCRIBE TABLE {qualified}").collect():
        transform = time_transform(row.data_type or "") if row.col_name.startswith("Part ") else None
        if transform and transform[1] == column:
            return transform[0]
    return "days"
