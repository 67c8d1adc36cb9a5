"""A table downstream of a changing table (one written by upsert, CDC, replace or recompute), kept up to date
with the upstream's inserts, updates and deletes (`TableChangesSource`).

A stream of a table's appends never sees a MERGE's updates and deletes: a downstream table would keep what the
upstream has since changed. Such a table is read through its change feed instead. Each run reads the upstream's
net changes from the commit the table's last run recorded up to the upstream's newest data commit
(`pipelines.io.table_changes`), hands them to the table's strategy (`Sink.follow`: recompute the groups, the
keys or the whole result they touch), commits, and then records the position (`pipelines.io.change_positions`).
A first run, or a position that can no longer be read (expired by maintenance, a table created again), recomputes
the whole table from the upstream as it is. A run whose upstreams have no new data commit starts no JVM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from pipelines.io.change_positions import ChangesRead, ReadUpTo, changes_read, ensure_writer_id, record_changes_read
from pipelines.io.format_types import CHANGE_IMAGE
from pipelines.io.table_changes import NetChanges, net_changes
from pipelines.sources.base import Run, SourceKind
from pipelines.spec.sources import TableChangesSource
from pipelines.write.follow import UpstreamChange
from pipelines.write.sinks import BatchContext

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.spec.tables import TableSpec


def followed(spec: TableSpec) -> tuple[str, ...]:
    """The upstreams whose commits the table keeps up with: its main input and its other streams."""
    return spec.streamed_upstreams


class TableChangesKind(SourceKind):
    """Follows a `TableChangesSource` through its change feed, one batch per run."""

    source: TableChangesSource
    trigger = "changes"

    def _positions(self, run: Run, spark: SparkSession | None) -> dict[str, ReadUpTo]:
        fmt, out = run.fmt, {}
        for table in followed(run.spec):
            snapshot = fmt.last_data_snapshot(spark, table)
            out[table] = ReadUpTo(fmt.table_id(spark, table), snapshot.snapshot_id if snapshot else None)
        return out

    def nothing_to_read(self, run: Run) -> bool:
        """The last run recorded every upstream's newest data commit (read from metadata, without a JVM)."""
        read = changes_read(run.checkpoint)
        return read is not None and read.upstreams == self._positions(run, run.running())

    def read_batches(self, run: Run) -> None:
        """Read what changed since the last run, let the table's strategy follow it, commit, record the position."""
        spark, spec = run.spark(), run.spec
        with run.clock.stage("prepare_tables"):
            self.prepare_tables(spark, run.fmt, spec)
        now = self._positions(run, spark)
        read = changes_read(run.checkpoint)
        with run.clock.stage("changes"):
            net = self._changes(run, spark, read, now)
        try:
            change = UpstreamChange(
                upstream=self.source.table,
                changed=net.rows,
                inputs=lambda: self._inputs(run, spark, now),
                transform=spec.transform,
                upstream_keys=self.source.keys,
            )
            ensure_writer_id(run.checkpoint)
            batch = 0 if read is None else read.batch + 1
            ctx = BatchContext(
                spark,
                run.fmt,
                spec.name,
                run.checkpoint,
                batch,
                run.metrics,
                run.files,
                run.clock,
                0,
                run.settings.home,
                spec.expectations,
                run.fence,
            )
            with run.clock.stage("batch.write"):
                spec.sink.follow(ctx, change)
        finally:
            net.unpersist()
        record_changes_read(run.checkpoint, ChangesRead(batch, now))
        report = run.report
        report.batches = report.data_batches = 1
        if net.rows is not None:
            report.rows_in = net.count
            run.metrics["changed_rows_read"] += net.count
        else:
            report.rows_in = sum(run.fmt.stats(spark, t).rows for t in now)
            run.metrics["whole_recomputes"] += 1
            report.note = net.unreadable

    def _changes(self, run: Run, spark: SparkSession, read: ChangesRead | None, now: dict[str, ReadUpTo]) -> NetChanges:
        """The main upstream's net changes since `read`; rows None when the table is recomputed whole."""
        table = self.source.table
        if read is None:
            return NetChanges(None, unreadable=None)
        before, after = read.upstreams.get(table), now[table]
        if before is None or before.table_id != after.table_id or before.commit is None or after.commit is None:
            return NetChanges(None, unreadable=f"{table} was created again since the last run: recomputed whole")
        if before.commit == after.commit:  # only another input changed: no row of this one
            empty = run.fmt.read(spark, table).limit(0).withColumn(CHANGE_IMAGE, F.lit("new"))
            return NetChanges(empty.persist(), 0)
        net = net_changes(spark, run.fmt, table, before.commit, after.commit)
        if net.rows is None:
            why = net.unreadable
            net.unreadable = (
                f"the changes of {table} since commit {before.commit} cannot be read ({why}): recomputed whole"
            )
        return net

    def _inputs(self, run: Run, spark: SparkSession, now: dict[str, ReadUpTo]) -> list[DataFrame]:
        """The function's inputs read whole, in the order the transform takes them; the followed upstreams at the
        commits the change runs up to."""
        spec = run.spec
        tables = [self.source.table, *(s.read_table() for s in spec.secondary_sources)]
        return [run.fmt.read(spark, t, now[t].commit if t in now else None) for t in tables if t is not None]
