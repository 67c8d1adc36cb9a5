"""The validating sink: row rules split a batch into valid rows and quarantine, valid rows are deduplicated by key.

Each commit it makes also records what its writer counted in the batch's one counting pass (`ROWS_READ_PROPERTY`
below, and the row expectations that held, `pipelines.spec.held`), in the same commit as the rows: a check can
then account for every row from commit metadata instead of scanning the tables again (`quality.pipeline_ledger`).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from datetime import date
from functools import reduce
from typing import ClassVar

from pyspark.sql import Column, DataFrame, Observation, Row, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DateType, IntegralType, StringType, StructType

from infra.errors import PipelineError
from infra.identifiers import check_column_names
from infra.spark_functions import with_batch_number
from pipelines.spec.expectations import Expectation
from pipelines.spec.held import countable, fingerprint, held_property, violation
from pipelines.spec.rules import REASONS_COLUMN, WARNINGS_COLUMN, Rule, passes_rules, rule_failure_counts
from pipelines.spec.strategy import Reprocess, Sink
from pipelines.spec.tables import OutputTable
from pipelines.write.collected import collect_exact, collectable
from pipelines.write.observed import observed
from pipelines.write.sinks import ROWS_IN, BatchContext

# The batch's rows a commit accounts for: on the table's commit its valid rows (the rows it added plus the
# duplicates it dropped), on the quarantine table's commit its invalid rows (added plus records sent again).
ROWS_READ_PROPERTY = "tributary.rows-read"

# The quarantine column that identifies a rejected row: the record as it landed.
QUARANTINE_IDENTITY = "raw_record"

# A batch with at most this many invalid rows quarantines them from the driver (`ValidateDedupeSink._quarantine`).
DRIVER_QUARANTINE_ROWS = 1000

# Key types whose smallest and largest value in a batch come back to Python and go into a filter unchanged, and
# which Iceberg and Delta order as Spark does (strings by code point): the stored-key lookup reads only the data
# files whose key range meets the batch's (`absent`).
_RANGED_KEY_TYPES = (StringType, IntegralType, DateType)


def quarantine_identity(rows: DataFrame) -> Column:
    """`raw_record` of `rows` as the quarantine table stores it: text, the corrupt line when there is one, else the
    landed record as JSON. A dedupe table's function carries it as the landed struct (`corrupt`, `record`), NULL
    for a valid row: rendered here, for rejected rows only, so that the batch's projection stays compiled (Spark
    evaluates `to_json` outside its generated code: about a second per million rows of every batch)."""
    column = F.col(QUARANTINE_IDENTITY)
    if not isinstance(rows.schema[QUARANTINE_IDENTITY].dataType, StructType):
        return column
    return F.coalesce(column["corrupt"], F.to_json(column["record"]))


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
        """Quarantine, fail, or deduplicate and append each row of the batch.

        Two passes over the batch: the first counts it (observed) and caches its invalid rows, usually few; the
        second writes the valid rows. Caching the whole batch instead, to read it once, cost more than the second
        scan saves: on 1 M events in one task the cache took 5.4-6.5 s to fill, the counting pass 4.0-4.6 s.
        """
        batch = with_batch_number(df, "_batch_id", ctx.batch_id)
        observation = Observation()
        invalid = self.quarantine_rows(batch.observe(observation, *self.stat_columns(batch, ctx.expectations)))
        invalid = invalid.persist()
        try:
            with ctx.clock.stage("batch.stats"):
                invalid.count()
                # (None when late; empty when the optimizer removed the observed plan, as for a batch that no rule
                # can reject: then counted again.)
                figures = observed(observation)
                stats = Row(**figures) if figures else self.stats(batch, ctx.expectations)
            self._write(ctx, batch, invalid, stats)
        finally:
            invalid.unpersist()

    def stats(self, rows: DataFrame, expectations: tuple[Expectation, ...] = ()) -> Row:
        """Counts of `rows` (`stat_columns`)."""
        return rows.agg(*self.stat_columns(rows, expectations)).collect()[0]

    def stat_columns(self, rows: DataFrame, expectations: tuple[Expectation, ...] = ()) -> list[Column]:
        """Counts of `rows`: all, invalid, valid with warnings, each rule's failures (`rule:<name>`), the valid
        rows' event-time range as microseconds (`lo`, `hi`), and the valid rows each countable expectation of
        `expectations` does not accept (`expect:<index>`, `pipelines.spec.held`), and the valid rows' smallest and
        largest first key part (`key_lo`, `key_hi`) when its type allows a range lookup (`_RANGED_KEY_TYPES`)."""
        is_valid = passes_rules()
        first_key = self.keys[0]
        ranged = isinstance(rows.schema[first_key].dataType, _RANGED_KEY_TYPES) if first_key in rows.columns else False
        key_range = [
            F.min(F.when(is_valid, F.col(first_key))).alias("key_lo"),
            F.max(F.when(is_valid, F.col(first_key))).alias("key_hi"),
        ]
        counted = [
            F.sum((is_valid & violation(e)).cast("long")).alias(f"expect:{i}")
            for i, e in enumerate(expectations)
            if countable(e, rows.columns)
        ]
        return [
            F.count(F.lit(1)).alias("rows"),
            F.sum((~is_valid).cast("long")).alias("invalid"),
            F.sum((is_valid & (F.size(WARNINGS_COLUMN) > 0)).cast("long")).alias("warned"),
            # As microseconds: a timestamp far from today (year 1) cannot become a Python datetime everywhere.
            F.min(F.when(is_valid, F.unix_micros(self.time_column))).alias("lo"),
            F.max(F.when(is_valid, F.unix_micros(self.time_column))).alias("hi"),
            *rule_failure_counts(self.rules),
            *counted,
            F.sum((is_valid & reduce(operator.or_, [F.col(k).isNull() for k in self.keys])).cast("long")).alias(
                "null_keys"
            ),
            *(key_range if ranged else []),
        ]

    def held(self, stats: Row, expectations: tuple[Expectation, ...]) -> list[str]:
        """The fingerprints of the expectations every row this sink writes from a batch meets: those no valid
        row failed (`stats`), and `unique` on the keys, which the first-copy-wins write makes hold when no valid
        row lacks a key part (a NULL part is never equal to a stored key, so such a key could be stored twice)."""
        counts = stats.asDict()
        found = [fingerprint(e) for i, e in enumerate(expectations) if counts.get(f"expect:{i}") == 0]
        if not counts["null_keys"]:
            found += [fingerprint(e) for e in expectations if e.kind == "unique" and set(e.columns) == set(self.keys)]
        return found

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

    def _write(self, ctx: BatchContext, batch: DataFrame, invalid_rows: DataFrame, stats: Row) -> None:
        if stats["rows"] == 0:
            return
        ctx.metrics[ROWS_IN] += stats["rows"]
        for rule in self.rules:
            ctx.metrics[f"rule_failures:{rule.name}"] += stats[f"rule:{rule.name}"] or 0
        failing = self.failed_fail_rule(stats)
        if failing:
            rule, failed = failing
            example = invalid_rows.filter(F.array_contains("reasons", rule.name)).limit(1).collect()[0]
            raise PipelineError(
                f"table {ctx.table}: rule {rule.name!r} ({rule.description or rule.expr}) failed for "
                f"{failed} row(s); e.g. in file {example['_source_file']}: "
                f"{ {c: example[c] for c in self.output_columns if c in example} }"
            )
        invalid = stats["invalid"] or 0
        if invalid:
            replayed = ctx.already_committed(self.quarantine_table)
            added = self._quarantine(ctx, invalid_rows, invalid)
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
        new = self._not_stored(ctx, first, stats).select(*self.output_columns)
        ledger = {ROWS_READ_PROPERTY: str(valid_rows), **held_property(self.held(stats, ctx.expectations))}
        added = ctx.append(new, ctx.table, ledger)
        ctx.metrics["duplicates_dropped"] += valid_rows - added

    def _not_stored(self, ctx: BatchContext, first: DataFrame, stats: Row) -> DataFrame:
        """The rows of `first` whose key the table does not hold yet (`absent`): a key is stored once, whatever
        the event time of a later copy. Stored keys are looked up within the batch's range of the first key part
        (`stats`' `key_lo` to `key_hi`, when counted)."""
        counts = stats.asDict()
        lo, hi = counts.get("key_lo"), counts.get("key_hi")
        if lo is None or hi is None:
            return absent(ctx, first, ctx.table, self.keys)
        kind = first.schema[self.keys[0]].dataType
        within = F.col(self.keys[0]).between(_literal(lo, kind), _literal(hi, kind))
        return absent(ctx, first, ctx.table, self.keys, within)

    def _quarantine(self, ctx: BatchContext, rows: DataFrame, invalid: int) -> int:
        """Append the batch's `invalid` rows (`rows`) to the quarantine table, once; return the rows added.

        A few flat rows are collected, deduplicated and committed from the driver (`append_rows`): on a small
        increment the Spark write of a handful of rows (a window, a lookup and a write job) took about half a
        second, the collect, the lookup and the commit about a fifth.
        """
        ledger = {ROWS_READ_PROPERTY: str(invalid)}
        if invalid > DRIVER_QUARANTINE_ROWS or not collectable(rows.select(*self.quarantine_columns).schema):
            return ctx.append(self._new_quarantine(ctx, rows), self.quarantine_table, ledger)
        return ctx.append_rows(lambda: self._new_quarantine_rows(ctx, rows), self.quarantine_table, ledger)

    def _new_quarantine_rows(self, ctx: BatchContext, rows: DataFrame) -> list[dict[str, object]]:
        """`_new_quarantine` on the driver: the first row of each `raw_record` by `order_by` (NULLs first, as the
        window orders them), without records the quarantine table already holds."""
        order = {f"_tributary_order_{i}": c for i, c in enumerate(self.order_by)}
        collected = collect_exact(rows.select(*self.quarantine_columns, *(F.col(c).alias(o) for o, c in order.items())))
        if QUARANTINE_IDENTITY not in self.quarantine_columns:
            return [{c: row[c] for c in self.quarantine_columns} for row in collected]
        first: dict[object, dict[str, object]] = {}
        for row in sorted(collected, key=lambda r: [(r[o] is not None, r[o]) for o in order]):
            first.setdefault(row[QUARANTINE_IDENTITY], row)
        landed = [record for record in first if record is not None]
        if landed and not ctx.holds_no_files(self.quarantine_table):
            # Read from Python: a Spark lookup of a few values in a quarantine table of 57 small files took 0.35 s,
            # pyiceberg 0.09 s.
            stored = ctx.fmt.read_rows(self.quarantine_table, [QUARANTINE_IDENTITY], (QUARANTINE_IDENTITY, landed))
            for row in stored:
                first.pop(row[QUARANTINE_IDENTITY], None)
        return [{c: row[c] for c in self.quarantine_columns} for row in first.values()]

    def _new_quarantine(self, ctx: BatchContext, rows: DataFrame) -> DataFrame:
        """Quarantine rows, without those whose original record is already quarantined (a file sent again).

        The record as landed (`raw_record`) is the identity of a rejected row: an invalid row has no trusted key.
        """
        if QUARANTINE_IDENTITY not in self.quarantine_columns:
            return rows.select(*self.quarantine_columns)
        order = Window.partitionBy(QUARANTINE_IDENTITY).orderBy(*self.order_by)
        first = rows.withColumn("_n", F.row_number().over(order)).filter("_n = 1").select(*self.quarantine_columns)
        return absent(ctx, first, self.quarantine_table, (QUARANTINE_IDENTITY,))


def _literal(value: object, kind: DataType) -> Column:
    """`value` (collected from a column of type `kind`, `_RANGED_KEY_TYPES`) as a literal of that type; a date as
    its ISO text, which Spark reads back exactly for any year (py4j failed to hand over the date 0001-01-01)."""
    return F.lit(value.isoformat() if isinstance(value, date) else value).cast(kind)


def absent(
    ctx: BatchContext, rows: DataFrame, table: str, keys: tuple[str, ...], within: Column | None = None
) -> DataFrame:
    """The `rows` whose `keys` `table` does not hold.

    Every stored row of the batch's keys is looked up: a semi join against the batch's keys, so only matches
    travel and the key columns alone are read; the anti join of the batch against them stays small. `within`, a
    condition every key of `rows` meets (a range of the first key part), is pushed to the table's scan, which
    then skips the data files whose key statistics lie outside it: with keys that grow over time (ids, dates)
    an increment reads a few files instead of every stored key. A table without data files (a first load)
    holds none, and the lookup would compute the rows twice.
    """
    if ctx.holds_no_files(table):
        return rows
    names = list(keys)
    stored = ctx.fmt.read(ctx.spark, table).select(*names)
    if within is not None:
        stored = stored.filter(within)
    stored = stored.join(rows.select(*names), names, "left_semi")
    return rows.join(stored, names, "left_anti")
