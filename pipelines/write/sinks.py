"""How each micro-batch reaches its tables, idempotently.

Spark re-executes the last planned batch after a crash. Appends are tagged with (writer, batch id) in the
Iceberg snapshot summary and skipped when that pair is already committed; recompute-and-merge sinks are
idempotent by construction. Together with the checkpoint this gives exactly-once tables.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import ClassVar

from pyspark.sql import Column, DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from infra.errors import PipelineError
from infra.home_record import note_first_day
from infra.identifiers import check_column_names
from infra.stopwatch import Stopwatch
from pipelines.io.checkpoints import query_id
from pipelines.io.formats import Merge, Staged, TableFormat
from pipelines.spec.rules import REASONS_COLUMN, WARNINGS_COLUMN, Rule, passes_rules, rule_failure_counts
from pipelines.spec.strategy import Reprocess, Sink
from pipelines.spec.tables import OutputTable

# The quarantine column that identifies a rejected row: the record as it landed.
QUARANTINE_IDENTITY = "raw_record"


def quarantine_identity(rows: DataFrame) -> Column:
    """`raw_record` of `rows` as the quarantine table stores it: text, the corrupt line when there is one, else the
    landed record as JSON. A dedupe table's function carries it as the landed struct (`corrupt`, `record`), NULL
    for a valid row: rendered here, for rejected rows only, so that the batch's projection stays compiled (Spark
    evaluates `to_json` outside its generated code: about a second per million rows of every batch)."""
    column = F.col(QUARANTINE_IDENTITY)
    if not isinstance(rows.schema[QUARANTINE_IDENTITY].dataType, StructType):
        return column
    return F.coalesce(column["corrupt"], F.to_json(column["record"]))


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

    def append(self, df: DataFrame, table: str) -> int:
        """Append once per (writer, batch); return rows added (0 for a replayed batch)."""
        return self._once(table, lambda: self.fmt.append(df, table, self.writer, self.batch_id), df)

    def holds_no_files(self, table: str) -> bool:
        """Whether `table` has no data files: a first load, with nothing to look up or match. (Files, not rows: a
        Delta file written without statistics counts no rows.)"""
        return self.fmt.stats(self.spark, table).data_files == 0

    def merge(self, rows: DataFrame, table: str, merge: Merge, upserted: int) -> None:
        """MERGE `rows` into `table`, counting `upserted` rows. Into a table without data files (a first load) the
        MERGE is an append of the rows it would insert, once per (writer, batch), without its join against the
        table: a replay finds those rows committed and merges, which changes nothing."""
        if self.holds_no_files(table):
            self.append(merge.inserted(rows), table)
            return
        self.fmt.merge(rows, table, merge)
        self.metrics[f"rows_upserted:{table}"] += upserted

    def append_rows(self, rows: list[dict[str, object]], table: str) -> int:
        """`append` for a few rows the driver holds, committed without a Spark job (`TableFormat.append_rows`)."""
        return self._once(table, lambda: self.fmt.append_rows(table, rows, self.writer, self.batch_id))

    def _once(self, table: str, commit: Callable[[], int], replayed: DataFrame | None = None) -> int:
        """Run `commit` unless this batch is already committed to `table` (then run the `replayed` plan, whose
        state a stateful query needs, without output); count the rows it added."""
        if self.already_committed(table):
            self.metrics["replayed_batches_skipped"] += 1
            if replayed is not None:
                run_without_output(replayed)
            return 0
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
            return df.withColumn(self.batch_id_column, F.lit(ctx.batch_id).cast("long"))
        return df

    def write(self, ctx: BatchContext, df: DataFrame) -> None:
        """Append the batch to the spec's table."""
        ctx.append(self.rows(ctx, df), ctx.table)


@dataclass(frozen=True)
class ValidateDedupeSink(Sink):
    """Split a batch by row rules into valid rows and a quarantine table; deduplicate valid rows by key.

    The first copy of a key wins: within a batch the first by `order_by`, across batches the stored one, whatever
    the later copy's event time or other values. Every batch checks its keys against all stored keys (no state
    to expire, so a copy arriving a year later is still a duplicate).
    """

    label: ClassVar[str] = "validate + dedupe"

    reprocess_by: ClassVar[Reprocess | None] = "revalidate"
    quarantines: ClassVar[bool] = True

    quarantine_table: str
    keys: tuple[str, ...]
    time_column: str
    columns: tuple[str, ...]
    quarantine_columns: tuple[str, ...]
    rules: tuple[Rule, ...]
    order_by: tuple[str, ...] = ("_source_file",)
    # The written table, when `columns` are left to its (inferred) schema.
    output: OutputTable | None = None

    def __post_init__(self) -> None:
        check_column_names((*self.keys, self.time_column, *self.order_by, *self.quarantine_columns))

    @property
    def output_columns(self) -> tuple[str, ...]:
        """The columns written to the table: as given, or those of the output table's schema."""
        if self.columns or self.output is None:
            return self.columns
        return tuple(self.output.schema.names)

    def write(self, ctx: BatchContext, df: DataFrame) -> None:
        """Quarantine, fail, or deduplicate and append each row of the batch."""
        batch = df.withColumn("_batch_id", F.lit(ctx.batch_id).cast("long")).persist()
        try:
            self._write(ctx, batch)
        finally:
            batch.unpersist()

    def stats(self, rows: DataFrame) -> Row:
        """Counts of `rows`: all, invalid, valid with warnings, each rule's failures (`rule:<name>`), and the
        valid rows' event-time range as microseconds (`lo`, `hi`)."""
        is_valid = passes_rules()
        return rows.agg(
            F.count(F.lit(1)).alias("rows"),
            F.sum((~is_valid).cast("long")).alias("invalid"),
            F.sum((is_valid & (F.size(WARNINGS_COLUMN) > 0)).cast("long")).alias("warned"),
            # As microseconds: a timestamp far from today (year 1) cannot become a Python datetime everywhere.
            F.min(F.when(is_valid, F.unix_micros(self.time_column))).alias("lo"),
            F.max(F.when(is_valid, F.unix_micros(self.time_column))).alias("hi"),
            *rule_failure_counts(self.rules),
        ).collect()[0]

    def failed_fail_rule(self, stats: Row) -> tuple[Rule, int] | None:
        """The first rule with action `fail` that some row failed, with its failure count."""
        for rule in self.rules:
            failed = stats[f"rule:{rule.name}"] or 0
            if rule.action == "fail" and failed:
                return rule, failed
        return None

    def first_per_key(self, rows: DataFrame) -> DataFrame:
        """The valid rows of `rows`, one per key: the first by `order_by` (later ones are duplicates)."""
        order = Window.partitionBy(*self.keys).orderBy(*self.order_by)
        return rows.filter(passes_rules()).withColumn("_n", F.row_number().over(order)).filter("_n = 1")

    def quarantine_rows(self, rows: DataFrame) -> DataFrame:
        """The invalid rows of `rows` as quarantine rows (with their `reasons`, and `raw_record` as text)."""
        invalid = rows.filter(~passes_rules()).withColumn("reasons", F.col(REASONS_COLUMN))
        if QUARANTINE_IDENTITY not in rows.columns:
            return invalid
        return invalid.withColumn(QUARANTINE_IDENTITY, quarantine_identity(rows))

    def _write(self, ctx: BatchContext, batch: DataFrame) -> None:
        stats = self.stats(batch)
        if stats["rows"] == 0:
            return
        ctx.metrics["rows_in"] += stats["rows"]
        for rule in self.rules:
            ctx.metrics[f"rule_failures:{rule.name}"] += stats[f"rule:{rule.name}"] or 0
        failing = self.failed_fail_rule(stats)
        if failing:
            rule, failed = failing
            example = batch.filter(F.array_contains(REASONS_COLUMN, rule.name)).limit(1).collect()[0]
            raise PipelineError(
                f"table {ctx.table}: rule {rule.name!r} ({rule.description or rule.expr}) failed for "
                f"{failed} row(s); e.g. in file {example['_source_file']}: "
                f"{ {c: example[c] for c in self.output_columns if c in example} }"
            )
        invalid = stats["invalid"] or 0
        if invalid:
            replayed = ctx.already_committed(self.quarantine_table)
            added = ctx.append(self._new_quarantine(ctx, batch), self.quarantine_table)
            if not replayed:
                ctx.metrics["rows_quarantined"] += added
                ctx.metrics["duplicates_dropped"] += invalid - added
        valid_rows = stats["rows"] - invalid
        if valid_rows == 0:
            return
        ctx.metrics["rows_with_warnings"] += stats["warned"] or 0
        if ctx.already_committed(ctx.table):
            ctx.metrics["replayed_batches_skipped"] += 1
            return
        first = self.first_per_key(batch)
        new = self._not_stored(ctx, first).select(*self.output_columns)
        added = ctx.append(new, ctx.table)
        ctx.metrics["duplicates_dropped"] += valid_rows - added

    def _not_stored(self, ctx: BatchContext, first: DataFrame) -> DataFrame:
        """The rows of `first` whose key the table does not hold yet.

        A key is stored once, whatever the event time of a later copy: every stored row of the batch's keys is
        looked up (a semi join, so only matches travel; the key columns alone are read). A table without data files
        (a first load) holds none, and the lookup would compute the batch's first rows twice.
        """
        if ctx.holds_no_files(ctx.table):
            return first
        keys = list(self.keys)
        stored = ctx.fmt.read(ctx.spark, ctx.table).select(*keys).join(first.select(*keys), keys, "left_semi")
        return first.join(stored, keys, "left_anti")

    def _new_quarantine(self, ctx: BatchContext, batch: DataFrame) -> DataFrame:
        """Quarantine rows, without those whose original record is already quarantined (a file sent again).

        The record as landed (`raw_record`) is the identity of a rejected row: an invalid row has no trusted key.
        """
        rows = self.quarantine_rows(batch)
        if QUARANTINE_IDENTITY not in self.quarantine_columns:
            return rows.select(*self.quarantine_columns)
        order = Window.partitionBy(QUARANTINE_IDENTITY).orderBy(*self.order_by)
        first = rows.withColumn("_n", F.row_number().over(order)).filter("_n = 1").select(*self.quarantine_columns)
        existing = ctx.fmt.read(ctx.spark, self.quarantine_table).select(QUARANTINE_IDENTITY)
        return first.join(existing, QUARANTINE_IDENTITY, "left_anti").select(*self.quarantine_columns)


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

    keys: tuple[str, ...]
    affected: Callable[[DataFrame], DataFrame]
    recompute: Callable[[SparkSession, TableFormat, list[dict]], DataFrame]
    upstream_keys: Callable[[SparkSession, TableFormat], DataFrame] | None = None

    def __post_init__(self) -> None:
        check_column_names(self.keys)

    def write(self, ctx: BatchContext, df: DataFrame) -> None:
        """MERGE the recomputed rows for the touched keys into the target table."""
        empty = ctx.holds_no_files(ctx.table)
        if empty and self.upstream_keys is not None and not df.isEmpty():
            keys = self.upstream_keys(ctx.spark, ctx.fmt)
        else:
            keys = self.affected(df)
        touched = [r.asDict() for r in keys.distinct().collect()]
        if not touched:
            return
        days = [v for key in touched for v in key.values() if isinstance(v, date) and not isinstance(v, datetime)]
        if days and ctx.home is not None:
            note_first_day(ctx.home, min(days))
        rows = self.recompute(ctx.spark, ctx.fmt, touched)
        ctx.metrics["keys_recomputed"] += len(touched)
        if empty:  # the MERGE is an append (`BatchContext.merge`), without the count
            ctx.append(rows, ctx.table)
            return
        rows = rows.persist()
        try:
            ctx.merge(rows, ctx.table, Merge(self.keys), upserted=rows.count())
        finally:
            rows.unpersist()
