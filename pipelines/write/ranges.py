"""Ranges of days of a table: which column partitions it by day, the rows of a range, and replacing them in one commit.

Shared by backfills (`pipelines.ops.backfill`), reprocessing (`pipelines.ops.reprocess`) and Dagster's daily
partitions. Every replacement is a single commit (Iceberg or Delta), so a failure leaves the table as it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DateType, TimestampNTZType, TimestampType

from infra.errors import ConfigError, PipelineError
from infra.identifiers import is_column_name
from infra.settings import Settings
from pipelines.io.formats import DayRange, TableFormat, table_format
from pipelines.io.partition_grain import time_transform
from pipelines.spec.tables import OutputTable, TableSpec


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
    """The column whose days partition `out`: `days(col)` (or `months`, `years`) on a timestamp or date, or an
    identity partition on a date."""
    for item in out.partition_by:
        text = item.strip().lower()
        transform = time_transform(text)
        if transform:
            return transform[1]
        if is_column_name(text) and text in out.schema.names and isinstance(out.schema[text].dataType, DateType):
            return text
    raise ConfigError(
        f"table {out.name!r} is not partitioned by day (partition_by={list(out.partition_by)}); only tables "
        "partitioned by days(<timestamp>) (or months, years) or by a date column can be backfilled or reprocessed "
        "by date range"
    )


def check_range(table: str, start: date, end: date) -> None:
    """Fail naming the table when the range is empty."""
    if end < start:
        raise ConfigError(f"table {table}: date range end {end} is before its start {start}")


def day_range(out: OutputTable, column: str, start: date, end: date) -> DayRange:
    """The rows of `out` whose `column` (a date or a timestamp) falls on the days start..end (UTC days)."""
    dtype = out.schema[column].dataType
    if not isinstance(dtype, DateType | TimestampType | TimestampNTZType):
        raise ConfigError(f"table {out.name!r}: column {column!r} is {dtype.simpleString()}, not a date or timestamp")
    return DayRange(column, start, end, timestamp=not isinstance(dtype, DateType))


def replace_range(fmt: TableFormat, out: OutputTable, rows: DataFrame, days: DayRange, operation: str) -> int | None:
    """Delete the rows on `days` and add `rows`, in one commit; return its snapshot id (Delta: version)."""
    return fmt.replace_days(rows.select(*out.schema.names), out.name, days, operation)


def days_of(start: date, end: date) -> list[date]:
    return [start + timedelta(days=i) for i in range((end - start).days + 1)]


def upstream_table(spark: SparkSession, fmt: TableFormat, spec: TableSpec) -> DataFrame:
    """The spec's upstream table now; a PipelineError naming it when it does not exist yet."""
    if spec.upstream is None or not fmt.exists(spark, spec.upstream):
        raise PipelineError(
            f"table {spec.name}: its upstream table {spec.upstream} does not exist yet; run the pipeline first"
        )
    return fmt.read(spark, spec.upstream)


def changed_days(spark: SparkSession, settings: Settings, out: OutputTable, since: datetime) -> list[date]:
    """Days of a date-partitioned table whose rows changed at or after `since`."""
    return table_format(settings).changed_days(spark, out.name, day_column(out), since)
