"""MERGE-based sinks: upserts by key, whole-table replacement, and change data capture (SCD type 1 and 2).

All three are idempotent by construction, so a micro-batch that Spark re-runs after a crash, or a change that a
producer sends twice, leaves the tables as they were: an upsert of the same rows changes nothing, a replacement
writes the same table, and CDC recomputes each touched key's history from every change it has seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from infra.errors import ConfigError
from infra.identifiers import check_column_names
from pipelines.io.formats import Merge
from pipelines.spec.strategy import Sink
from pipelines.write.follow import UpstreamChange
from pipelines.write.sinks import ROWS_IN, BatchContext


@dataclass(frozen=True)
class UpsertSink(Sink):
    """MERGE each batch into the table by `keys` (update mode windows, reference tables).

    With `version_column`, a row only replaces a stored row with a version that is not newer, and a batch keeps
    the newest row per key, so out-of-order deliveries cannot roll a key back.
    """

    label: ClassVar[str] = "upsert"
    appends_only: ClassVar[bool] = False

    keys: tuple[str, ...]
    version_column: str | None = None
    output_modes: ClassVar[tuple[str, ...]] = ("append", "update")

    def __post_init__(self) -> None:
        if not self.keys:
            raise ConfigError("UpsertSink needs at least one key column")
        check_column_names((*self.keys, *([self.version_column] if self.version_column else [])))

    def _newest(self, df: DataFrame) -> DataFrame:
        """One row per key: with a version column, the newest."""
        if not self.version_column:
            return df
        newest = Window.partitionBy(*self.keys).orderBy(F.col(self.version_column).desc())
        return df.withColumn("_n", F.row_number().over(newest)).filter("_n = 1").drop("_n")

    @property
    def _newer(self) -> str | None:
        return f"s.{self.version_column} >= t.{self.version_column}" if self.version_column else None

    def write(self, ctx: BatchContext, df: DataFrame) -> None:
        """Upsert the batch into the spec's table."""
        rows = self._newest(df).persist()
        try:
            n = rows.count()
            if not n:
                return
            ctx.merge(rows, ctx.table, Merge(self.keys, null_safe_keys=True, update_when=self._newer), upserted=n)
        finally:
            rows.unpersist()

    def follow(self, ctx: BatchContext, change: UpstreamChange) -> None:
        """The function over the upstream's rows, now, of every upstream key that changed, upserted; a key of the
        function over a changed row's old image that no current row gives any more is deleted; one MERGE. With no
        known changes, or an upstream without keys, the table is replaced with the function over the upstream."""
        if change.changed is None or not change.upstream_keys:
            ctx.overwrite(self._newest(change.result()))
            return
        upstream, *others = change.inputs()
        keys = list(change.upstream_keys)
        touched = change.images("old").unionByName(change.images("new")).select(*keys).distinct()
        rows = self._newest(change.transform(upstream.join(touched, keys, "left_semi"), *others)).persist()
        try:
            before = change.transform(change.images("old"), *others).select(*self.keys).distinct()
            gone_keys = before.join(rows.select(*self.keys), list(self.keys), "left_anti")
            gone = ctx.fmt.read(ctx.spark, ctx.table).join(gone_keys, list(self.keys), "left_semi")
            ctx.merge_with_deletes(rows, gone, self.keys, self._newer)
        finally:
            rows.unpersist()


@dataclass(frozen=True)
class OverwriteSink(Sink):
    """Replace the whole table with each batch: the sink for complete mode, which re-emits the full result."""

    label: ClassVar[str] = "overwrite"

    output_modes: ClassVar[tuple[str, ...]] = ("complete",)
    appends_only: ClassVar[bool] = False

    def write(self, ctx: BatchContext, df: DataFrame) -> None:
        """Atomically replace the table's rows with the batch (one commit)."""
        ctx.overwrite(df)

    def follow(self, ctx: BatchContext, change: UpstreamChange) -> None:
        """The whole result again, over the inputs as they are now, in one commit."""
        ctx.overwrite(change.result())


@dataclass(frozen=True)
class CdcSink(Sink):
    """Apply a change feed (insert / update / delete with a sequence number) as SCD type 1 and type 2.

    `history_table` (SCD2) keeps one row per change: `valid_from` is the change's time, `valid_to` the next
    change's time (NULL for the last), `is_current` marks the live version, and a delete is kept as a closed
    tombstone row (`is_deleted`). The spec's own table (SCD1) holds the live version of each key, with the
    sequence number it came from. Each batch recomputes the whole chain of every key it touches from the stored
    history plus its own changes, deduplicated by (key, sequence): changes may arrive in any order and any
    number of times, and the tables only depend on the set of distinct changes seen.
    """

    label: ClassVar[str] = "cdc"
    appends_only: ClassVar[bool] = False

    history_table: str
    key: str
    sequence: str
    op_column: str
    time_column: str
    value_columns: tuple[str, ...]
    delete_op: str = "D"
    ops: tuple[str, ...] = ("I", "U", "D")

    def __post_init__(self) -> None:
        check_column_names((self.key, self.sequence, self.op_column, self.time_column, *self.value_columns))

    def write(self, ctx: BatchContext, df: DataFrame) -> None:
        """Recompute and MERGE the history (SCD2) and then the current rows (SCD1) of the touched keys."""
        cols = [self.key, self.op_column, self.sequence, self.time_column, *self.value_columns]
        valid = (
            F.col(self.key).isNotNull()
            & F.col(self.sequence).isNotNull()
            & F.col(self.time_column).isNotNull()
            & F.col(self.op_column).isin(list(self.ops))
        )
        batch = df.persist()
        try:
            stats = batch.agg(F.count(F.lit(1)).alias("rows"), F.sum((~valid).cast("long")).alias("bad")).collect()
            rows, bad = stats[0]["rows"], stats[0]["bad"] or 0
            if not rows:
                return
            ctx.metrics[ROWS_IN] += rows
            ctx.metrics["cdc_rows_invalid"] += bad
            changes = batch.filter(valid).select(*cols).dropDuplicates([self.key, self.sequence])
            self._apply(ctx, changes)
        finally:
            batch.unpersist()

    def _apply(self, ctx: BatchContext, changes: DataFrame) -> None:
        incoming = changes.withColumn("_stored", F.lit(False))
        if ctx.holds_no_files(self.history_table):  # a first load: no stored version to look up or keep
            merged = incoming.withColumn("_replayed", F.lit(False))
        else:
            merged = self._with_stored(ctx, changes, incoming)
        chain = Window.partitionBy(self.key).orderBy(self.sequence)
        history = (
            merged.withColumn("valid_to", F.lead(self.time_column).over(chain))
            .withColumn("is_deleted", F.col(self.op_column) == self.delete_op)
            .withColumn("is_current", F.col("valid_to").isNull() & ~F.col("is_deleted"))
            .select(
                self.key,
                *self.value_columns,
                self.sequence,
                F.col(self.time_column).alias("valid_from"),
                "valid_to",
                "is_current",
                "is_deleted",
                "_stored",
                "_replayed",
            )
            .persist()
        )
        try:
            counts = history.agg(
                F.count(F.when(~F.col("_stored"), 1)).alias("new"),
                F.count(F.when(F.col("_replayed"), 1)).alias("replayed"),
            ).collect()[0]
            new_changes = counts["new"]
            ctx.metrics["cdc_changes_applied"] += new_changes
            ctx.metrics["cdc_changes_replayed"] += counts["replayed"]
            if new_changes:
                changed = "NOT (t.valid_to IS NOT DISTINCT FROM s.valid_to) OR t.is_current <> s.is_current"
                merge = Merge((self.key, self.sequence), update_when=changed)
                ctx.merge(history.drop("_stored", "_replayed"), self.history_table, merge, upserted=new_changes)
            # Also on a replay: a crash between the history commit and this one left the current rows behind.
            self._apply_current(ctx, history)
        finally:
            history.unpersist()

    def _with_stored(self, ctx: BatchContext, changes: DataFrame, incoming: DataFrame) -> DataFrame:
        """The touched keys' stored versions and the incoming ones, one row per (key, sequence)."""
        touched = changes.select(self.key).distinct()
        stored = (
            ctx.fmt.read(changes.sparkSession, self.history_table)
            .join(touched, self.key, "left_semi")
            .select(
                self.key,
                F.when(F.col("is_deleted"), F.lit(self.delete_op)).otherwise(F.lit("U")).alias(self.op_column),
                self.sequence,
                F.col("valid_from").alias(self.time_column),
                *self.value_columns,
                F.lit(True).alias("_stored"),
            )
        )
        # A (key, sequence) already stored is a replay: keep the stored version.
        version = Window.partitionBy(self.key, self.sequence)
        return (
            stored.unionByName(incoming)
            # A stored version that came in again: counted as replayed in the same pass as the new ones.
            .withColumn("_replayed", F.col("_stored") & (F.count(F.lit(1)).over(version) > 1))
            .withColumn("_n", F.row_number().over(version.orderBy(F.col("_stored").desc())))
            .filter("_n = 1")
            .drop("_n")
        )

    def _apply_current(self, ctx: BatchContext, history: DataFrame) -> None:
        latest = history.filter(F.col("valid_to").isNull()).select(
            self.key,
            *self.value_columns,
            F.col(self.sequence).alias("last_sequence"),
            F.col("valid_from").alias("updated_at"),
            "is_deleted",
        )
        if ctx.holds_no_files(ctx.table):  # a first load: every live key is behind, a deleted one has nothing
            latest = latest.filter(~F.col("is_deleted")).persist()
        else:
            stored = ctx.fmt.read(ctx.spark, ctx.table).select(
                self.key, F.col("last_sequence").alias("_stored_sequence")
            )
            live = F.col("_stored_sequence").isNotNull()
            behind = F.when(F.col("is_deleted"), live).otherwise(
                ~live | (F.col("_stored_sequence") != F.col("last_sequence"))
            )
            latest = latest.join(stored, self.key, "left").filter(behind).drop("_stored_sequence").persist()
        try:
            n = latest.count()
            if n:
                self._merge_current(ctx, latest, n)
        finally:
            latest.unpersist()

    def _merge_current(self, ctx: BatchContext, latest: DataFrame, n: int) -> None:
        merge = Merge(
            (self.key,),
            delete_when="s.is_deleted",
            update_when="t.last_sequence <> s.last_sequence",
            insert_when="NOT s.is_deleted",
            columns=(self.key, *self.value_columns, "last_sequence", "updated_at"),
        )
        ctx.merge(latest, ctx.table, merge, upserted=n)
