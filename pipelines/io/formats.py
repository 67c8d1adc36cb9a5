"""Table formats: which adapter serves each table.

Iceberg (`pipelines.io.iceberg`) is the default; Delta Lake (`pipelines.io.delta`) is written and read through
delta-rs and Spark's own Parquet reader and writer, because delta-spark's jars are not available to every install.
A home's tables are in `TRIBUTARY_TABLE_FORMAT` unless a spec declares its own (`format="delta"`): a table is
created in its declared format and, once it exists, every operation goes to the format it exists in, so a Delta
gold table can read an Iceberg silver stream and the other way round. The operations are
`pipelines.io.format_types.TableFormat`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from infra.errors import ConfigError
from infra.settings import TABLE_FORMATS, Settings
from infra.sql.table_metadata import Snapshot
from pipelines.io.checkpoints import ConsumerPosition
from pipelines.io.delta import DeltaFormat
from pipelines.io.format_types import DayRange, Merge, Staged, TableFormat, TableStats
from pipelines.io.iceberg import IcebergFormat
from pipelines.spec.tables import OutputTable

__all__ = [
    "DeltaFormat",
    "IcebergFormat",
    "Merge",
    "Staged",
    "TableFormat",
    "TableFormats",
    "TableStats",
    "table_format",
]


class TableFormats:
    """The `TableFormat` of a home: each call goes to the adapter of the table it names."""

    def __init__(self, settings: Settings):
        if settings.table_format not in TABLE_FORMATS:
            raise ConfigError(f"unknown table format {settings.table_format!r}; choose one of {TABLE_FORMATS}")
        self.settings = settings
        self.adapters: dict[str, TableFormat] = {"iceberg": IcebergFormat(settings), "delta": DeltaFormat(settings)}
        self._known: dict[str, str] = {}

    def format_of(self, name: str) -> str:
        """`iceberg` or `delta`: the format `name` exists in (the home's default for a table not created yet).

        A Delta table is a folder with a log (a stat); a table in both formats (the home switched formats) is read
        in the home's default one.
        """
        known = self._known.get(name)
        if known is not None:
            return known
        default = self.settings.table_format
        other = "iceberg" if default == "delta" else "delta"
        in_default = self._probe(default, name)
        chosen = other if not in_default and self._probe(other, name) else default
        if in_default or chosen == other:  # it exists: its format will not change while this object lives
            self._known[name] = chosen
        return chosen

    def _probe(self, table_format: str, name: str) -> bool:
        """Whether `name` exists in `table_format`, asked without starting a JVM where that is possible: a home on
        a SQLite catalog without its database file holds no Iceberg table."""
        settings = self.settings
        if table_format == "iceberg" and settings.uses_sqlite and not settings.catalog_db.is_file():
            return False
        return self.adapters[table_format].exists(None, name)

    def adapter(self, name: str) -> TableFormat:
        """The adapter serving `name`."""
        return self.adapters[self.format_of(name)]

    def qualified(self, name: str) -> str:
        return self.adapter(name).qualified(name)

    def ensure_table(
        self, spark: SparkSession, table: OutputTable, allow_added: bool = False, table_format: str | None = None
    ) -> None:
        """Create a missing table in `table_format` (None: the home's default), else check it where it exists."""
        exists = any(a.exists(spark, table.name) for a in self.adapters.values())
        chosen = self.format_of(table.name) if exists else (table_format or self.settings.table_format)
        if not exists and chosen != "iceberg" and self.settings.warehouse_url:
            raise ConfigError(
                f"table {table.name} declares format={chosen!r}, but TRIBUTARY_WAREHOUSE={self.settings.warehouse_url} "
                "is on object storage, which holds Iceberg tables only so far: remove format= from its declaration"
            )
        self.adapters[chosen].ensure_table(spark, table, allow_added)
        self._known[table.name] = chosen

    def columns(self, spark: SparkSession, name: str) -> list[str]:
        return self.adapter(name).columns(spark, name)

    def add_string_columns(self, spark: SparkSession, name: str, columns: list[str]) -> None:
        self.adapter(name).add_string_columns(spark, name, columns)

    def committed_batches(self, spark: SparkSession, name: str, writer: str, since: int = 0) -> set[int]:
        return self.adapter(name).committed_batches(spark, name, writer, since)

    def append(
        self, df: DataFrame, name: str, writer: str, batch_id: int, properties: Mapping[str, str] | None = None
    ) -> int:
        return self.adapter(name).append(df, name, writer, batch_id, properties)

    def append_rows(
        self, name: str, rows: Sequence[Mapping], writer: str, batch_id: int, properties: Mapping | None = None
    ) -> int:
        return self.adapter(name).append_rows(name, rows, writer, batch_id, properties)

    def read_rows(
        self, name: str, columns: Sequence[str], among: tuple[str, Sequence[object]] | None = None
    ) -> list[dict[str, object]]:
        return self.adapter(name).read_rows(name, columns, among)

    def latest_properties(self, spark: SparkSession | None, name: str, key: str) -> dict[str, str] | None:
        return self.adapter(name).latest_properties(spark, name, key)

    def stage_append(self, df: DataFrame, name: str, writer: str, batch_id: int) -> Staged:
        return self.adapter(name).stage_append(df, name, writer, batch_id)

    def read_staged(self, spark: SparkSession, name: str, staged: Staged) -> DataFrame:
        return self.adapter(name).read_staged(spark, name, staged)

    def publish(self, spark: SparkSession, name: str, staged: Staged) -> None:
        self.adapter(name).publish(spark, name, staged)

    def exists(self, spark: SparkSession | None, name: str) -> bool:
        return self.adapter(name).exists(spark, name)

    def current_snapshot(self, spark: SparkSession | None, name: str) -> Snapshot | None:
        return self.adapter(name).current_snapshot(spark, name)

    def last_data_snapshot(self, spark: SparkSession | None, name: str) -> Snapshot | None:
        return self.adapter(name).last_data_snapshot(spark, name)

    def stats(self, spark: SparkSession | None, name: str) -> TableStats:
        return self.adapter(name).stats(spark, name)

    def read(self, spark: SparkSession, name: str, snapshot_id: int | None = None) -> DataFrame:
        return self.adapter(name).read(spark, name, snapshot_id)

    def read_stream(self, spark: SparkSession, name: str, checkpoint: Path | None = None) -> DataFrame:
        return self.adapter(name).read_stream(spark, name, checkpoint)

    def appended_rows(self, spark: SparkSession, name: str, since: int | None, until: int | None) -> DataFrame | None:
        """As `TableFormat.appended_rows`; `until` None (a table never written) has appended nothing."""
        if until is None:
            return self.read(spark, name).limit(0) if since is None else None
        return self.adapter(name).appended_rows(spark, name, since, until)

    def appended_summaries(self, spark: SparkSession, name: str, since: int | None, until: int | None) -> list | None:
        """As `TableFormat.appended_summaries`; `until` None (a table never written) has appended nothing."""
        if until is None:
            return [] if since is None else None
        return self.adapter(name).appended_summaries(spark, name, since, until)

    def table_id(self, spark: SparkSession | None, name: str) -> str:
        return self.adapter(name).table_id(spark, name)

    def consumer_caught_up(self, spark: SparkSession | None, name: str, checkpoint: Path) -> bool:
        return self.adapter(name).consumer_caught_up(spark, name, checkpoint)

    def consumer_position(self, name: str, consumer: str, checkpoint: Path) -> ConsumerPosition:
        return self.adapter(name).consumer_position(name, consumer, checkpoint)

    def changed_days(self, spark: SparkSession, name: str, column: str, since: datetime) -> list[date]:
        return self.adapter(name).changed_days(spark, name, column, since)

    def merge(self, df: DataFrame, name: str, merge: Merge, properties: Mapping[str, str] | None = None) -> None:
        self.adapter(name).merge(df, name, merge, properties)

    def change_feed(self, spark: SparkSession, name: str, since: int, until: int) -> DataFrame:
        return self.adapter(name).change_feed(spark, name, since, until)

    def overwrite(self, df: DataFrame, name: str, properties: Mapping[str, str] | None = None) -> None:
        self.adapter(name).overwrite(df, name, properties)

    def replace_days(self, df: DataFrame, name: str, days: DayRange, operation: str) -> int | None:
        return self.adapter(name).replace_days(df, name, days, operation)

    def replay_problem(self, spark: SparkSession, name: str) -> str | None:
        return self.adapter(name).replay_problem(spark, name)

    def drop(self, spark: SparkSession, name: str) -> None:
        self.adapter(name).drop(spark, name)
        self._known.pop(name, None)


def table_format(settings: Settings) -> TableFormats:
    """The table formats of the home `settings` describes."""
    return TableFormats(settings)
