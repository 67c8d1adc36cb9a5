"""Iceberg tables in the platform catalog: the default table format."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from infra.errors import ConfigError, PipelineError
from infra.identifiers import validate_table_name
from infra.settings import Settings
from infra.spark import get_spark
from infra.sql.catalog import CatalogReader
from infra.sql.table_metadata import Snapshot, TableMetadata
from pipelines.io import iceberg_commits, iceberg_history
from pipelines.io.checkpoints import ConsumerPosition, caught_up_offsets, restart_position
from pipelines.io.format_types import DayRange, Merge, Staged, TableStats, check_schema
from pipelines.io.iceberg_history import (
    BATCH_PROPERTY,
    OPERATION_ID_PROPERTY,
    OPERATION_PROPERTY,
    WAP_PREFIX,
    WRITER_PROPERTY,
    appended_since,
    changelog,
    table_uuid,
)
from pipelines.io.iceberg_options import DEFAULT_TABLE_PROPERTIES, LANDING_WRITE_OPTIONS, STREAM_READ_OPTIONS
from pipelines.io.iceberg_rows import append_rows, read_rows
from pipelines.io.partition_grain import chosen_partitions, table_grain, widened
from pipelines.spec.tables import OutputTable


class IcebergFormat:
    """Iceberg tables in the platform catalog."""

    def __init__(self, settings: Settings):
        self.catalog = settings.catalog_name
        self.settings = settings

    def qualified(self, name: str) -> str:
        """`catalog.namespace.table` after validating the identifier."""
        ns, table = validate_table_name(name)
        return f"{self.catalog}.{ns}.{table}"

    def ensure_table(self, spark: SparkSession, table: OutputTable, allow_added: bool = False) -> None:
        """Create the namespace and table if missing; add declared columns it lacks; fail naming the table if
        a column's type differs or (unless `allow_added`) it holds columns the spec does not declare.

        With a SQLite catalog its database says what exists: a table that stands as declared asks Spark nothing,
        and Spark is not asked again whether a table or namespace exists (a run holds the table's lock)."""
        local = self._sqlite_tables()
        if local is not None and table.name in local:
            found = self._local_metadata(table.name)
            if found is not None and found.stands_as(table.schema.fields, allow_added):
                return
        qualified = self.qualified(table.name)
        ns = qualified.rsplit(".", 1)[0]
        namespace = table.name.rsplit(".", 1)[0]
        if local is None or all(name.rsplit(".", 1)[0] != namespace for name in local):
            spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
        if (local is None or table.name in local) and spark.catalog.tableExists(qualified):
            existing = spark.table(qualified).schema
            check_schema(table.name, existing, table.schema, allow_added)
            missing = [f for f in table.schema.fields if f.name not in existing.names]
            if missing:
                columns = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in missing)
                spark.sql(f"ALTER TABLE {qualified} ADD COLUMNS ({columns})")
            return
        props = ", ".join(f"'{k}'='{v}'" for k, v in DEFAULT_TABLE_PROPERTIES.items())
        upstream = self.qualified(table.grain_from) if table.grain_from else None
        partition_by = chosen_partitions(spark, table.partition_by, upstream)
        partition = f" PARTITIONED BY ({', '.join(partition_by)})" if partition_by else ""
        ddl = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in table.schema.fields)
        spark.sql(f"CREATE TABLE IF NOT EXISTS {qualified} ({ddl}) USING iceberg{partition} TBLPROPERTIES ({props})")

    def _sqlite_tables(self) -> set[str] | None:
        """The tables (`namespace.table`) in the SQLite catalog database; None without one on disk."""
        if not (self.settings.uses_sqlite and self.settings.catalog_db.is_file()):
            return None
        try:
            return set(CatalogReader(self.settings).locations())
        except ConfigError:
            return None

    def columns(self, spark: SparkSession, name: str) -> list[str]:
        """The table's column names now (from its metadata)."""
        return spark.table(self.qualified(name)).columns

    def add_string_columns(self, spark: SparkSession, name: str, columns: list[str]) -> None:
        """Add nullable string columns (Iceberg schema evolution: a metadata-only change)."""
        ddl = ", ".join(f"`{c}` string" for c in columns)
        spark.sql(f"ALTER TABLE {self.qualified(name)} ADD COLUMNS ({ddl})")

    def committed_batches(self, spark: SparkSession, name: str, writer: str, since: int = 0) -> set[int]:
        """Read main's snapshot summaries: each append records which writer and batch made it (a staged append
        never published is on no branch)."""
        return iceberg_history.committed_batches(spark, self.qualified(name), writer, since)

    def append(
        self, df: DataFrame, name: str, writer: str, batch_id: int, properties: Mapping[str, str] | None = None
    ) -> int:
        """One Iceberg commit whose snapshot summary names the writer and batch (the idempotence key), and holds
        `properties`.

        Returns the rows the commit added, read back from the snapshot summary rather than counted.
        """
        qualified = self.qualified(name)
        summary = {WRITER_PROPERTY: writer, BATCH_PROPERTY: str(batch_id), **(properties or {})}
        df.writeTo(qualified).options(**{f"snapshot-property.{k}": v for k, v in summary.items()}).append()
        return iceberg_history.added_rows(df.sparkSession, qualified, writer, batch_id)

    def append_rows(
        self, name: str, rows: Sequence[Mapping], writer: str, batch_id: int, properties: Mapping | None = None
    ) -> int:
        """pyiceberg commits the rows, with the snapshot summary of `append` (`iceberg_rows`)."""
        summary = {WRITER_PROPERTY: writer, BATCH_PROPERTY: str(batch_id), **(properties or {})}
        return append_rows(self.settings, name, rows, summary)

    def read_rows(
        self, name: str, columns: Sequence[str], among: tuple[str, Sequence[object]] | None = None
    ) -> list[dict[str, object]]:
        """pyiceberg scans the current snapshot (`iceberg_rows`)."""
        return read_rows(self.settings, name, columns, among)

    def stage_append(self, df: DataFrame, name: str, writer: str, batch_id: int) -> Staged:
        """Iceberg write-audit-publish: the append is committed as a snapshot off the main branch (`spark.wap.id`),
        with `LANDING_WRITE_OPTIONS` (the one caller stages landing batches)."""
        qualified = self.qualified(name)
        spark = df.sparkSession  # a streaming query's own session: the WAP id touches no other query's writes
        iceberg_history.enable_staging(spark, qualified)
        wap_id = f"{WAP_PREFIX}/{writer}/{batch_id}/{uuid.uuid4().hex[:12]}"
        spark.conf.set("spark.wap.id", wap_id)
        try:
            (
                df.writeTo(qualified)
                .option(f"snapshot-property.{WRITER_PROPERTY}", writer)
                .option(f"snapshot-property.{BATCH_PROPERTY}", str(batch_id))
                .options(**LANDING_WRITE_OPTIONS)
                .append()
            )
        finally:
            spark.conf.unset("spark.wap.id")
        staged = iceberg_history.staged_snapshot(spark, qualified, wap_id)
        if staged is None:
            raise PipelineError(f"table {name}: batch {batch_id} was not staged off the main branch (wap.id {wap_id})")
        return Staged(*staged)

    def read_staged(self, spark: SparkSession, name: str, staged: Staged) -> DataFrame:
        """The staged snapshot's appended rows: an incremental read from its parent (the whole snapshot if none)."""
        reader = spark.read.format("iceberg")
        if staged.parent_id is None:  # Iceberg for Spark 4.1 takes Spark's own time-travel option
            reader = reader.option("versionAsOf", str(staged.snapshot_id))
        else:
            reader = reader.option("start-snapshot-id", str(staged.parent_id))
            reader = reader.option("end-snapshot-id", str(staged.snapshot_id))
        return reader.load(self.qualified(name))

    def publish(self, spark: SparkSession, name: str, staged: Staged) -> None:
        """Cherry-pick the staged snapshot onto main: a fast-forward when main has not moved since it was staged.

        Through Iceberg's Java API, resolving the table as a write does: in a streaming query's session the `CALL`
        statement does not find a catalog registered after the session started.
        """
        table = iceberg_history.load_table(spark, self.qualified(name))
        table.manageSnapshots().cherrypick(staged.snapshot_id).commit()

    def read(self, spark: SparkSession, name: str, snapshot_id: int | None = None) -> DataFrame:
        """The table now, or as of snapshot `snapshot_id` (time travel)."""
        qualified = self.qualified(name)
        if snapshot_id is None:
            return spark.table(qualified)
        return spark.sql(f"SELECT * FROM {qualified} VERSION AS OF {int(snapshot_id)}")

    def appended_rows(self, spark: SparkSession, name: str, since: int | None, until: int) -> DataFrame | None:
        """Iceberg's incremental append scan (`iceberg_history.appended_since`)."""
        return appended_since(spark, self.qualified(name), since, until)

    def table_id(self, spark: SparkSession | None, name: str) -> str:
        """The table's UUID, from its metadata file when it is local (no JVM needed)."""
        metadata = self._local_metadata(name)
        if metadata is not None:
            return metadata.uuid
        return table_uuid(self._session(spark), self.qualified(name))

    def read_stream(self, spark: SparkSession, name: str, checkpoint: Path | None = None) -> DataFrame:
        """Iceberg's streaming source over the table's appends (a new stream starts at the table's oldest snapshot,
        whatever `checkpoint` holds), read with `STREAM_READ_OPTIONS`."""
        return spark.readStream.format("iceberg").options(**STREAM_READ_OPTIONS).load(self.qualified(name))

    def consumer_caught_up(self, spark: SparkSession | None, name: str, checkpoint: Path) -> bool:
        """The newest data snapshot (compactions add no rows and are not streamed) is the one the stream's last
        batch read to its end, and that batch owes nothing (`caught_up_offsets`)."""
        snapshot = self.last_data_snapshot(spark, name)
        if snapshot is None:
            return True
        offsets = caught_up_offsets(checkpoint)
        return offsets is not None and any(
            snapshot_id == snapshot.snapshot_id and position >= (snapshot.count("added-data-files") or 0)
            for snapshot_id, position in offsets
        )

    def consumer_position(self, name: str, consumer: str, checkpoint: Path) -> ConsumerPosition:
        """Read from the consumer's checkpoint: its Iceberg source offsets carry the snapshot id."""
        return restart_position(consumer, checkpoint)

    def changed_days(self, spark: SparkSession, name: str, column: str, since: datetime) -> list[date]:
        """From the `partitions` metadata table: the day partitions last updated at or after `since` (no scan)."""
        # Metadata tables filtered by DataFrame, not SQL parameters: Iceberg 1.12's SQL extension parser drops the
        # parameters Spark 4.1 passes to it (UNBOUND_SQL_PARAMETER).
        since_utc = since.astimezone(UTC).replace(tzinfo=None)
        partitions = spark.table(f"{self.qualified(name)}.partitions")
        changed = partitions.where(F.col("last_updated_at") >= F.lit(since_utc))
        rows = changed.select(F.col(f"partition.{column}").alias("d")).distinct().collect()
        return sorted(r.d for r in rows if r.d is not None)

    def merge(self, df: DataFrame, name: str, merge: Merge, properties: Mapping[str, str] | None = None) -> None:
        """`MERGE INTO` the table, with `properties` in its summary."""
        iceberg_commits.merge(df, self.qualified(name), merge, properties)

    def overwrite(self, df: DataFrame, name: str, properties: Mapping[str, str] | None = None) -> None:
        """One Iceberg overwrite commit replacing every row, with `properties` in its summary."""
        iceberg_commits.overwrite(df, self.qualified(name), properties)

    def change_feed(self, spark: SparkSession, name: str, since: int, until: int) -> DataFrame:
        """The table's changes in the snapshots after `since` up to `until` (`iceberg_history.changelog`)."""
        return changelog(spark, self.qualified(name), since, until)

    def replace_days(self, df: DataFrame, name: str, days: DayRange, operation: str) -> int | None:
        """One Iceberg overwrite by filter on whole partitions, so whole files are dropped (no row-level
        rewrite): on a table partitioned by months or years, the partitions' other days are written again."""
        qualified = self.qualified(name)
        whole = widened(days, table_grain(df.sparkSession, qualified, days.column))
        if whole != days:
            df = df.unionByName(df.sparkSession.table(qualified).filter(whole.condition() & ~days.condition()))
        op_id = uuid.uuid4().hex
        (
            df.writeTo(qualified)
            .option(f"snapshot-property.{OPERATION_PROPERTY}", operation)
            .option(f"snapshot-property.{OPERATION_ID_PROPERTY}", op_id)
            .overwrite(whole.condition())
        )
        snapshots = df.sparkSession.table(f"{qualified}.snapshots")
        found = snapshots.where(F.col("summary")[OPERATION_ID_PROPERTY] == F.lit(op_id)).select("snapshot_id").collect()
        return found[0].snapshot_id if found else None

    def replay_problem(self, spark: SparkSession, name: str) -> str | None:
        """A snapshot whose parent was expired, or an overwrite or delete (a reprocess) in the history."""
        return iceberg_history.replay_problem(spark, self.qualified(name))

    def appended_summaries(self, spark: SparkSession, name: str, since: int | None, until: int) -> list[dict] | None:
        """Walked in the table's metadata (`iceberg_history.appended_summaries`)."""
        return iceberg_history.appended_summaries(self._session(spark), self.qualified(name), since, until)

    def drop(self, spark: SparkSession, name: str) -> None:
        """`DROP TABLE ... PURGE`."""
        spark.sql(f"DROP TABLE IF EXISTS {self.qualified(name)} PURGE")

    def _local_metadata(self, name: str) -> TableMetadata | None:
        """The table's metadata read from the SQLite catalog and its metadata file (on disk or in the bucket),
        without a JVM; None when that is not possible here (another catalog database)."""
        if not self.settings.uses_sqlite:
            return None
        try:
            return CatalogReader(self.settings).metadata(name)
        except ConfigError:  # metadata on object storage
            return None

    def _session(self, spark: SparkSession | None) -> SparkSession:
        return spark if spark is not None else get_spark(self.settings)

    def exists(self, spark: SparkSession | None, name: str) -> bool:
        """Whether the table exists; with a SQLite catalog, read from the catalog database (no JVM needed)."""
        local = self._sqlite_tables()
        if local is not None:
            return name in local
        return self._session(spark).catalog.tableExists(self.qualified(name))

    def current_snapshot(self, spark: SparkSession | None, name: str) -> Snapshot | None:
        """The current snapshot of the main branch, from the table's metadata file (no JVM needed).

        A catalog other than SQLite is asked through Spark instead.
        """
        metadata = self._local_metadata(name)
        if metadata is not None:
            return metadata.current
        qualified = self.qualified(name)
        query = (
            f"SELECT s.snapshot_id, s.parent_id, s.committed_at, s.summary FROM {qualified}.snapshots s "
            f"JOIN {qualified}.refs r ON s.snapshot_id = r.snapshot_id WHERE r.name = 'main'"
        )
        rows = self._session(spark).sql(query).collect()
        if not rows:
            return None
        row = rows[0]
        return Snapshot(row.snapshot_id, row.parent_id, int(row.committed_at.timestamp() * 1000), None, row.summary)

    def last_data_snapshot(self, spark: SparkSession | None, name: str) -> Snapshot | None:
        """The newest snapshot on the main branch that is not a `replace` (a compaction: same rows, new files).

        Streams skip `replace` snapshots, so a consumer that read up to the snapshot before a compaction has read
        everything. Without local metadata (object storage, another catalog) this is the current snapshot.
        """
        metadata = self._local_metadata(name)
        if metadata is None:
            return self.current_snapshot(spark, name)
        snapshot = metadata.current
        while snapshot is not None and snapshot.operation == "replace" and snapshot.parent_id is not None:
            snapshot = metadata.snapshots.get(int(snapshot.parent_id))
        return snapshot

    def latest_properties(self, spark: SparkSession | None, name: str, key: str) -> dict[str, str] | None:
        """Walk the main branch from its current snapshot to the newest summary holding `key` (local metadata, else
        the snapshots and history tables through Spark)."""
        metadata = self._local_metadata(name)
        if metadata is not None:
            snapshot = metadata.current
            while snapshot is not None and key not in snapshot.summary:
                parent = snapshot.parent_id
                snapshot = metadata.snapshots.get(int(parent)) if parent is not None else None
            return None if snapshot is None else dict(snapshot.summary)
        qualified = self.qualified(name)
        session = self._session(spark)
        snapshots = session.table(f"{qualified}.snapshots").alias("s")
        history = session.table(f"{qualified}.history").alias("h")
        rows = (
            snapshots.join(history, F.col("s.snapshot_id") == F.col("h.snapshot_id"))
            .where(F.col("h.is_current_ancestor") & F.col("s.summary")[F.lit(key)].isNotNull())
            .orderBy(F.col("h.made_current_at").desc())
            .select("s.summary")
            .limit(1)
            .collect()
        )
        return dict(rows[0].summary) if rows else None

    def stats(self, spark: SparkSession | None, name: str) -> TableStats:
        """Numbers from the current snapshot's summary, which every Iceberg commit keeps up to date (no scan)."""
        snapshot = self.current_snapshot(spark, name)
        if snapshot is None:
            return TableStats(snapshot_id=None, rows=0, data_files=0, bytes=0)
        return TableStats(
            snapshot_id=snapshot.snapshot_id,
            rows=snapshot.count("total-records") or 0,
            data_files=snapshot.count("total-data-files") or 0,
            bytes=snapshot.count("total-files-size") or 0,
        )
