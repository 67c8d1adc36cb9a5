"""How each micro-batch reaches its tables, idempotently.

Spark re-executes the last planned batch after a crash. Appends are tagged with (writer, batch id) in the
Iceberg snapshot summary and skipped when that pair is already committed; recompute-and-merge sinks are
idempotent by construction. Together with the checkpoint this gives exactly-once tables.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import ClassVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from infra.home_record import note_first_day
from infra.identifiers import check_column_names
from infra.spark_functions import with_batch_number
from infra.stopwatch import Stopwatch
from pipelines.io.checkpoints import query_id
from pipelines.io.formats import Merge, Staged, TableFormat
from pipelines.spec.expectations import Expectation
from pipelines.spec.strategy import Reprocess, Sink
from pipelines.write.follow import UpstreamChange, in_groups

# A row of a MERGE's source that deletes its key from the table (`BatchContext.merge_with_deletes`).
_GONE = "_tributary_gone"
# The metric of the rows a sink was handed, counted by a sink that reads its batch more than once (Spark's own
# count of a query's input rows counts every read).
ROWS_IN = "rows_in"


def no_fence() -> None:
    """The fence of a write that holds no writer lock of its own (its caller holds it, or a test writes)."""


@dataclass
class BatchContext:
    """What a sink needs to write one micro-batch; `metrics` accumulates over the run."""

    spark: SparkSession
    fmt: TableFormat
    table: str
    checkpoint: Path
    batch_id: int
    metrics: Counter[str] = field(default_factory=Counter)
    # Health of the landed files this run wrote (pipelines.sources.file_health.FileHealth), shared across batches.
    files: list = field(default_factory=list)
    # Where the run's time goes (shared across batches): appends and commit lookups are timed here.
    clock: Stopwatch = field(default_factory=Stopwatch)
    # Landing batches of at least this many bytes are staged and audited before publishing (file_health.write_staged).
    stage_bytes: int = 0
    # The home whose first data day a day-keyed sink records (infra.home_record.note_first_day); None: not recorded.
    home: Path | None = None
    # The table's expectations: a validating sink records which row expectations its rows meet (`pipelines.spec.held`).
    expectations: tuple[Expectation, ...] = ()
    # Called before every commit: raises when the run lost its table's writer lock (`pipelines.run.locks`).
    fence: Callable[[], None] = no_fence
    _committed: dict[str, set[int]] = field(default_factory=dict)

    @property
    def writer(self) -> str:
        """The streaming query id, stable across restarts of the same checkpoint."""
        return query_id(self.checkpoint)

    def already_committed(self, table: str) -> bool:
        """Whether this batch was already committed to `table` by this writer (a replay after a crash)."""
        if table not in self._committed:
            with self.clock.stage("batch.commit_lookup"):
                self._committed[table] = self.fmt.committed_batches(self.spark, table, self.writer, self.batch_id)
        return self.batch_id in self._committed[table]

    def append(self, df: DataFrame, table: str, properties: Mapping[str, str] | None = None) -> int:
        """Append once per (writer, batch), with `properties` in the commit; return rows added (0 for a replay)."""
        return self._once(table, lambda: self.fmt.append(df, table, self.writer, self.batch_id, properties), df)

    def holds_no_files(self, table: str) -> bool:
        """Whether `table` has no data files: a first load, with nothing to look up or match. (Files, not rows: a
        Delta file written without statistics counts no rows.)"""
        return self.fmt.stats(self.spark, table).data_files == 0

    def merge(
        self, rows: DataFrame, table: str, merge: Merge, upserted: int, properties: Mapping[str, str] | None = None
    ) -> None:
        """MERGE `rows` into `table`, counting `upserted` rows, with `properties` in the commit. Into a table without
        data files (a first load) the MERGE is an append of the rows it would insert, once per (writer, batch),
        without its join against the table: a replay finds those rows committed and merges, which changes
        nothing."""
        if self.holds_no_files(table):
            self.append(merge.inserted(rows), table, properties)
            return
        self.fence()
        self.fmt.merge(rows, table, merge, properties)
        self.metrics[f"rows_upserted:{table}"] += upserted

    def overwrite(self, rows: DataFrame, properties: Mapping[str, str] | None = None) -> None:
        """Replace the table's rows with `rows` in one commit (with `properties` in it), counting them."""
        rows = rows.persist()
        try:
            n = rows.count()
            self.fence()
            self.fmt.overwrite(rows, self.table, properties)
        finally:
            rows.unpersist()
        self.metrics[f"rows_upserted:{self.table}"] += n

    def merge_with_deletes(
        self, rows: DataFrame, gone: DataFrame, keys: tuple[str, ...], update_when: str | None = None
    ) -> None:
        """One MERGE into the table by `keys`: `rows` updated (when `update_when`) or inserted, and the stored rows
        of `gone` (the table's columns) deleted."""
        columns = tuple(self.fmt.columns(self.spark, self.table))
        source = (
            rows.select(*columns)
            .withColumn(_GONE, F.lit(False))
            .unionByName(gone.select(*columns).withColumn(_GONE, F.lit(True)))
            .persist()
        )
        try:
            kept, deleted = source.agg(F.count(F.when(~F.col(_GONE), 1)), F.count(F.when(F.col(_GONE), 1))).first()
            if not kept and not deleted:
                return
            merge = Merge(
                keys,
                null_safe_keys=True,
                delete_when=f"s.{_GONE}",
                update_when=update_when,
                insert_when=f"NOT s.{_GONE}",
                columns=columns,
            )
            self.merge(source, self.table, merge, upserted=kept)
            self.metrics[f"rows_deleted:{self.table}"] += deleted
        finally:
            source.unpersist()

    def append_rows(
        self,
        rows: list[dict[str, object]] | Callable[[], list[dict[str, object]]],
        table: str,
        properties: Mapping[str, str] | None = None,
    ) -> int:
        """`append` for a few rows the driver holds (or a function making them, not called on a replay), committed
        without a Spark job (`TableFormat.append_rows`)."""

        def commit() -> int:
            held = rows() if callable(rows) else rows
            return self.fmt.append_rows(table, held, self.writer, self.batch_id, properties)

        return self._once(table, commit)

    def _once(self, table: str, commit: Callable[[], int], replayed: DataFrame | None = None) -> int:
        """Run `commit` unless this batch is already committed to `table` (then run the `replayed` plan, whose
        state a stateful query needs, without output); count the rows it added."""
        if self.already_committed(table):
            self.metrics["replayed_batches_skipped"] += 1
            if replayed is not None:
                run_without_output(replayed)
            return 0
        self.fence()
        with self.clock.stage("batch.append"):
            added = commit()
        self._committed[table].add(self.batch_id)
        self.metrics[f"rows_written:{table}"] += added
        return added

    def stage(self, df: DataFrame, table: str) -> Staged:
        """Write a batch not yet committed to `table` without publishing it (`publish` commits it)."""
        with self.clock.stage("batch.append"):
            return self.fmt.stage_append(df, table, self.writer, self.batch_id)

    def publish(self, spark: SparkSession, staged: Staged, table: str) -> int:
        """Commit a staged batch to `table` (in the session that staged it); return the rows it added."""
        self.fence()
        with self.clock.stage("batch.publish"):
            self.fmt.publish(spark, table, staged)
        self._committed.setdefault(table, set()).add(self.batch_id)
        self.metrics[f"rows_written:{table}"] += staged.rows
        return staged.rows


def run_without_output(df: DataFrame) -> None:
    """Execute a replayed batch whose rows are already committed, discarding them.

    A stateful query (windows, joins, deduplication, pandas state) updates its state store and event-time
    watermark only when the batch's plan runs: skipping the plan would leave the replayed batch's state and
    watermark unwritten, and windows that batch closes would never be emitted.
    """
    df.write.format("noop").mode("overwrite").save()


@dataclass(frozen=True)
class AppendSink(Sink):
    """Append every row; optionally stamp the batch id into a column."""

    label: ClassVar[str] = "append"

    reprocess_by: ClassVar[Reprocess | None] = "reread_files"

    batch_id_column: str | None = None

    def rows(self, ctx: BatchContext, df: DataFrame) -> DataFrame:
        """The rows the batch appends (stamped with its id when asked)."""
        if self.batch_id_column:
            return with_batch_number(df, self.batch_id_column, ctx.batch_id)
        return df

    def write(self, ctx: BatchContext, df: DataFrame) -> None:
        """Append the batch to the spec's table."""
        ctx.append(self.rows(ctx, df), ctx.table)


@dataclass(frozen=True)
class RecomputeMergeSink(Sink):
    """Recompute the target rows for the keys a batch touches, then MERGE them in (idempotent on replay).

    `affected` maps the batch to the distinct partition keys it touches; `recompute` builds the complete
    target rows for those keys from the upstream table. `upstream_keys`, when given, maps the upstream table to
    the keys all of its rows touch: a first load takes its keys from it, because a micro-batch in `foreachBatch`
    is a scan of every column of its rows (no column pruning), which on 5 M wide rows took seconds more than
    reading the one key column of the table. Recomputing every key the upstream holds is exact whatever the
    batch held, as every recompute is.
    """

    label: ClassVar[str] = "recompute by key"

    recomputes_by_key: ClassVar[bool] = True
    appends_only: ClassVar[bool] = False

    keys: tuple[str, ...]
    affected: Callable[[DataFrame], DataFrame]
    recompute: Callable[[SparkSession, TableFormat, list[dict]], DataFrame]
    upstream_keys: Callable[[SparkSession, TableFormat], DataFrame] | None = None
    # The upstream columns `affected` selects (the groups); a following table deletes a group's rows that a
    # recompute no longer returns.
    by: tuple[str, ...] = ()
    # The upstream table (whose rows a first load reads from the table rather than from its batch).
    upstream: str = ""

    def __post_init__(self) -> None:
        check_column_names(self.keys)

    def write(self, ctx: BatchContext, df: DataFrame) -> None:
        """MERGE the recomputed rows for the touched keys into the target table."""
        empty = ctx.holds_no_files(ctx.table)
        touched = self.touched(ctx, df, empty)
        if not touched:
            return
        if empty and self.upstream:
            # A first load reads every upstream row from the table, its batch only for whether it holds one: Spark
            # counts that one row in. Its rows in are the upstream's rows (then every batch of the run counts its own).
            ctx.metrics[ROWS_IN] += ctx.fmt.stats(ctx.spark, self.upstream).rows
        elif ROWS_IN in ctx.metrics:
            ctx.metrics[ROWS_IN] += df.count()
        self.merge_recomputed(ctx, self.recompute(ctx.spark, ctx.fmt, touched), touched, empty)

    def touched(self, ctx: BatchContext, df: DataFrame, empty: bool) -> list[dict]:
        """The groups (`by` values) batch `df` touches; into an `empty` table, every group the upstream holds."""
        with ctx.clock.stage("batch.keys"):
            if empty and self.upstream_keys is not None and not df.isEmpty():
                keys = self.upstream_keys(ctx.spark, ctx.fmt)
            else:
                keys = self.affected(df)
            touched = [r.asDict() for r in keys.distinct().collect()]
        days = [v for key in touched for v in key.values() if isinstance(v, date) and not isinstance(v, datetime)]
        if days and ctx.home is not None:
            note_first_day(ctx.home, min(days))
        return touched

    def merge_recomputed(
        self,
        ctx: BatchContext,
        rows: DataFrame,
        touched: list[dict],
        empty: bool,
        properties: Mapping[str, str] | None = None,
    ) -> None:
        """MERGE the recomputed `rows` of the `touched` groups by the keys (with `properties` in the commit)."""
        ctx.metrics["keys_recomputed"] += len(touched)
        if empty:  # the MERGE is an append (`BatchContext.merge`), without the count
            ctx.append(rows, ctx.table, properties)
            return
        rows = rows.persist()
        try:
            with ctx.clock.stage("batch.recompute"):
                upserted = rows.count()
            # Null-safe: a group-by keeps a NULL key as a group, which a plain `=` match would insert again.
            merge = Merge(self.keys, null_safe_keys=True)
            ctx.merge(rows, ctx.table, merge, upserted=upserted, properties=properties)
        finally:
            rows.unpersist()

    def follow(self, ctx: BatchContext, change: UpstreamChange) -> None:
        """Recompute every group an old or a new image of a changed upstream row falls in (a deleted row's group
        too, which may then hold no row: its rows are deleted), in one MERGE; the whole table when the changes are
        not known, or when it does not hold the group columns."""
        columns = ctx.fmt.columns(ctx.spark, ctx.table)
        whole = change.changed is None or not self.by or not set(self.by) <= set(columns)
        with ctx.clock.stage("batch.keys"):
            if whole:
                assert self.upstream_keys is not None
                groups = self.upstream_keys(ctx.spark, ctx.fmt)
            else:
                groups = self.affected(change.images("old").unionByName(change.images("new")))
            touched = [r.asDict() for r in groups.distinct().collect()]
        ctx.metrics["keys_recomputed"] += len(touched)
        if whole:
            empty = ctx.fmt.read(ctx.spark, ctx.table).limit(0)
            ctx.overwrite(self.recompute(ctx.spark, ctx.fmt, touched) if touched else empty)
            return
        if not touched:
            return
        rows = self.recompute(ctx.spark, ctx.fmt, touched).persist()
        try:
            stored = in_groups(ctx.fmt.read(ctx.spark, ctx.table), self.by, touched)
            gone = stored.join(rows.select(*self.keys), list(self.keys), "left_anti")
            ctx.merge_with_deletes(rows, gone, self.keys)
        finally:
            rows.unpersist()
