"""A `recompute` table whose function is a combinable group-by (`pipelines.write.aggregates`), kept by folding each
batch's partial aggregate into the stored rows instead of recomputing the groups it touches.

Why it is exact. Every commit records `AggregatedThrough`: the newest upstream batch (the upstream's `_batch_id`)
whose rows the stored rows may hold. A batch whose rows all come from later upstream batches cannot hold a row the
table already counts, so its partial aggregate is folded in by one MERGE (counts and sums added, minimums and
maximums kept). Any other batch (a replay after a kill between the commit and the checkpoint, rows of one upstream
batch split over two batches, a stream started again from the upstream's first snapshot) recomputes the groups it
touches from the upstream rows up to the newest batch recorded or seen, as a plain recompute does, and the record
moves on. Every recompute reads only rows up to the batch it records, so a row the upstream writes meanwhile is
counted once, when its own batch arrives.

The whole table is recomputed (through the upstream's newest batch) when nothing says what its rows hold: a first
load, no record on its newest data commit (a table written before, or by a backfill or a changing upstream's
recompute since), another upstream table (created again), or another aggregate shape (the function changed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.io.formats import Merge, TableFormat
from pipelines.write.aggregates import AggregatedThrough, combinations, fingerprint, merge_sets
from pipelines.write.sinks import ROWS_IN, BatchContext, RecomputeMergeSink

# The upstream column naming the batch that wrote each row (bronze and silver tables carry it).
BATCH_COLUMN = "_batch_id"


@dataclass(frozen=True)
class IncrementalAggregateSink(RecomputeMergeSink):
    """`RecomputeMergeSink` that folds a batch's partial aggregate in when that is exact (module docstring)."""

    # The table's function on a batch of upstream rows (its partial aggregate).
    partial: Callable[[DataFrame], DataFrame] | None = None
    # The recomputed rows of the touched groups from the upstream rows of batches up to the given one.
    recompute_through: Callable[[SparkSession, TableFormat, list[dict], int], DataFrame] | None = None

    def write(self, ctx: BatchContext, df: DataFrame) -> None:
        """Fold the batch in, recompute the groups it touches, or recompute the table (module docstring)."""
        assert self.partial is not None and self.recompute_through is not None
        partial = self.partial(df)  # planned once: its plan says whether it combines, and it is what is folded in
        combine = combinations(partial, self.keys) if BATCH_COLUMN in df.columns else None
        if combine is None:
            ctx.metrics["aggregate_not_combinable"] = 1
            super().write(ctx, df)
            return
        spark, fmt = ctx.spark, ctx.fmt
        shape = fingerprint(self.keys, combine)
        upstream_id = fmt.table_id(spark, self.upstream)
        if ctx.holds_no_files(ctx.table):
            # A first load takes every upstream row (read from the table, not from the batch): those are its rows in.
            ctx.metrics[ROWS_IN] += fmt.stats(spark, self.upstream).rows
            self._recompute_whole(ctx, df, True, upstream_id, shape)
            return
        with ctx.clock.stage("batch.keys"):
            first, last, rows = df.agg(F.min(BATCH_COLUMN), F.max(BATCH_COLUMN), F.count(F.lit(1))).first()
        # The batch is read more than once (its range, then its partial aggregate or groups): Spark's count of the
        # rows read would count it twice.
        ctx.metrics[ROWS_IN] += rows
        if not rows:
            return
        stored = self._stored(ctx)
        if stored is None or stored.upstream != upstream_id or stored.shape != shape:
            self._recompute_whole(ctx, df, False, upstream_id, shape)
            return
        through = max(stored.through, last)
        record = AggregatedThrough(upstream_id, through, shape).property()
        if first > stored.through:
            self._fold(ctx, partial, combine, record)
            return
        ctx.metrics["aggregate_batches_recomputed"] += 1
        touched = self.touched(ctx, df, empty=False)
        if touched:
            rows_of_groups = self.recompute_through(spark, fmt, touched, through)
            self.merge_recomputed(ctx, rows_of_groups, touched, empty=False, properties=record)

    def _stored(self, ctx: BatchContext) -> AggregatedThrough | None:
        """The record on the table's newest data commit (compactions pass it on unchanged)."""
        snapshot = ctx.fmt.last_data_snapshot(ctx.spark, ctx.table)
        return AggregatedThrough.read(snapshot.summary) if snapshot is not None else None

    def _recompute_whole(self, ctx: BatchContext, df: DataFrame, empty: bool, upstream_id: str, shape: str) -> None:
        assert self.recompute_through is not None
        spark, fmt = ctx.spark, ctx.fmt
        with ctx.clock.stage("batch.keys"):
            through = fmt.read(spark, self.upstream).agg(F.max(BATCH_COLUMN)).first()[0]
        touched = self.touched(ctx, df, empty=True) if through is not None else []
        if not touched:
            return
        rows = self.recompute_through(spark, fmt, touched, through)
        record = AggregatedThrough(upstream_id, through, shape).property()
        if empty:
            self.merge_recomputed(ctx, rows, touched, empty=True, properties=record)
            return
        ctx.metrics["aggregate_whole_recomputes"] += 1
        ctx.metrics["keys_recomputed"] += len(touched)
        ctx.overwrite(rows, record)

    def _fold(self, ctx: BatchContext, partial: DataFrame, combine: dict[str, str], record: dict[str, str]) -> None:
        """MERGE the batch's partial rows into the stored ones: matched rows combined, new groups inserted."""
        partial = partial.persist()
        try:
            with ctx.clock.stage("batch.partial"):
                groups = partial.count()
            ctx.metrics["aggregate_batches_folded"] += 1
            ctx.metrics["groups_folded"] += groups
            merge = Merge(self.keys, null_safe_keys=True, sets=merge_sets(combine))
            ctx.merge(partial, ctx.table, merge, upserted=groups, properties=record)
        finally:
            partial.unpersist()
