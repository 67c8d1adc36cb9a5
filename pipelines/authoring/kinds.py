"""Write strategies as declared kinds: `append`, `dedupe`, `recompute`, `upsert`, `replace`, `cdc`.

A kind turns a declaration into what the runner needs: the streaming transform, the sink, the output mode, the
extra tables it owns (quarantine, history) with their schemas, and the checks every table of the kind gets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BooleanType, LongType, StringType, StructField, StructType, TimestampType

from pipelines.authoring.declarations import Built, Declaration, Kind
from pipelines.io.landing_parse import CORRUPT_COLUMN, KAFKA_LINEAGE, LANDED_LINEAGE
from pipelines.spec.expectations import row_count_vs_upstream, unique
from pipelines.spec.rules import REASONS_COLUMN, WARNINGS_COLUMN, Rule, apply_rules
from pipelines.spec.tables import OutputTable
from pipelines.write.aggregate_sink import IncrementalAggregateSink
from pipelines.write.follow import in_groups
from pipelines.write.merge import CdcSink, OverwriteSink, UpsertSink
from pipelines.write.sinks import AppendSink, RecomputeMergeSink
from pipelines.write.validate import QUARANTINE_IDENTITY, ValidateDedupeSink

BATCH_ID = StructField("_batch_id", LongType())
# Landing columns a refined table leaves behind (they stay in bronze and in the quarantine table).
LANDING_ONLY = frozenset(f.name for f in (*LANDED_LINEAGE, *KAFKA_LINEAGE) if f.name != "_source_file")
WORKING = frozenset({QUARANTINE_IDENTITY, REASONS_COLUMN, WARNINGS_COLUMN, "_batch_id"})
# The landed record (and corrupt line) carried through a dedupe table's function for its quarantine rows.
_LANDED = "_tributary_landed"
QUARANTINE_TAIL = (
    StructField("reasons", ArrayType(StringType())),
    StructField(QUARANTINE_IDENTITY, StringType()),
    StructField("_source_file", StringType()),
    StructField("_ingested_at", TimestampType()),
    BATCH_ID,
)


def _with_batch_id(schema: StructType) -> StructType:
    return StructType([*(f for f in schema.fields if f.name != BATCH_ID.name), BATCH_ID])


@dataclass(frozen=True)
class Append(Kind):
    """Append every row; bronze and silver rows carry the `_batch_id` that wrote them."""

    def finish(self, d: Declaration, schema: StructType) -> StructType:
        if d.layer == "gold":
            return schema
        fields = [BATCH_ID if f.name == BATCH_ID.name else f for f in schema.fields]
        return StructType(fields) if BATCH_ID.name in schema.names else StructType([*fields, BATCH_ID])

    def build(self, d: Declaration, output: OutputTable, rules: tuple[Rule, ...], call: Callable) -> Built:
        return Built(AppendSink(batch_id_column=None if d.layer == "gold" else BATCH_ID.name))


@dataclass(frozen=True)
class Dedupe(Kind):
    """Rows failing a rule go to `<table>_quarantine` with their reasons; valid rows are kept once per key."""

    keys: tuple[str, ...] = ()
    time: str = ""
    order_by: tuple[str, ...] = ("_source_file",)
    validates = True

    def transform(self, d: Declaration, rules: tuple[Rule, ...], call: Callable[..., DataFrame]) -> Callable:
        def validated(*frames: DataFrame) -> DataFrame:
            first = frames[0]
            # The record is kept as it landed, before the author's cleaning, for the quarantine table. It is
            # rendered as JSON only for the rows the rules reject: rendering every row cost silver seconds.
            business = F.struct(*[F.col(c) for c in first.columns if not c.startswith("_")])
            corrupt = F.col(CORRUPT_COLUMN) if CORRUPT_COLUMN in first.columns else F.lit(None).cast("string")
            landed = first.withColumn(_LANDED, F.struct(business.alias("record"), corrupt.alias("corrupt")))
            out = call(landed, *frames[1:])
            self._require(d, out.columns, self.keys)  # before the key rules refer to them
            if _LANDED not in out.columns:  # before the landed rules refer to the input's columns
                raise d.error(
                    "dedupe keeps each row's landed record for the quarantine, but the function dropped its input's "
                    "columns",
                    "keep the input's columns (withColumn rather than select), dropping only columns you name",
                )
            checked = apply_rules(out, rules)
            # The landed struct, for rejected rows only; the sink renders it as text (`quarantine_identity`).
            landed = F.when(F.size(REASONS_COLUMN) > 0, F.col(_LANDED))
            return checked.withColumn(QUARANTINE_IDENTITY, landed).drop(_LANDED)

        return validated

    @staticmethod
    def _require(d: Declaration, columns: list[str], needed: tuple[str, ...]) -> None:
        missing = [c for c in needed if c not in columns]
        if missing:
            raise d.error(
                f"dedupe needs the column(s) {', '.join(missing)} in what the function returns",
                "keep the input's columns (withColumn rather than select) and name existing columns in dedupe()",
            )

    def finish(self, d: Declaration, schema: StructType) -> StructType:
        self._require(d, schema.names, (*self.keys, self.time, *self.order_by, "_ingested_at"))
        kept = [f for f in schema.fields if f.name not in WORKING | LANDING_ONLY]
        ordered = [f for f in kept if not f.name.startswith("_")] + [f for f in kept if f.name.startswith("_")]
        return StructType([*ordered, BATCH_ID])

    def build(self, d: Declaration, output: OutputTable, rules: tuple[Rule, ...], call: Callable) -> Built:
        quarantine = OutputTable(
            f"{d.name}_quarantine",
            infer=lambda: StructType([*(output.schema[k] for k in self.keys), *QUARANTINE_TAIL]),
        )
        sink = ValidateDedupeSink(
            quarantine_table=quarantine.name,
            keys=self.keys,
            time_column=self.time,
            columns=(),
            quarantine_columns=(*self.keys, *(f.name for f in QUARANTINE_TAIL)),
            rules=rules,
            order_by=self.order_by,
            output=output,
        )
        upstream = (row_count_vs_upstream(d.streams[0], max_ratio=1.0),) if d.streams else ()
        return Built(sink, extra_outputs=(quarantine,), checks=(unique(*self.keys), *upstream))


@dataclass(frozen=True)
class Recompute(Kind):
    """Gold kept exact: the rows of every `by` value a batch touches are recomputed from the upstream and merged."""

    by: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    where: str | None = None
    recomputes = True
    follows_changes = True

    def transform(self, d: Declaration, rules: tuple[Rule, ...], call: Callable[..., DataFrame]) -> Callable:
        return lambda main, *_references: main

    def build(self, d: Declaration, output: OutputTable, rules: tuple[Rule, ...], call: Callable) -> Built:
        by = self.by

        def recompute_through(spark: Any, fmt: Any, touched: list[dict], through: int | None) -> DataFrame:
            upstream = fmt.read(spark, d.streams[0])
            if through is not None:
                upstream = upstream.filter(F.col(BATCH_ID.name) <= F.lit(through))
            return call(in_groups(upstream, by, touched), *(fmt.read(spark, t) for t in d.statics))

        def recompute(spark: Any, fmt: Any, touched: list[dict]) -> DataFrame:
            return recompute_through(spark, fmt, touched, None)

        where = self.where

        def affected(df: DataFrame) -> DataFrame:
            return (df.filter(where) if where else df).select(*by)

        def upstream_keys(spark: Any, fmt: Any) -> DataFrame:
            return affected(fmt.read(spark, d.streams[0]))

        common = {"keys": self.keys, "affected": affected, "recompute": recompute, "upstream_keys": upstream_keys}
        if d.statics:  # a reference table can change under stored rows: only a recompute stays exact
            sink: RecomputeMergeSink = RecomputeMergeSink(**common, by=by, upstream=d.streams[0])
        else:  # folds batches in when the function is a combinable group-by (pipelines.write.aggregates)
            sink = IncrementalAggregateSink(
                **common, by=by, upstream=d.streams[0], partial=call, recompute_through=recompute_through
            )
        return Built(sink, checks=(unique(*self.keys),))


@dataclass(frozen=True)
class Upsert(Kind):
    """MERGE rows by key; with `version`, an older version never replaces a newer one."""

    keys: tuple[str, ...] = ()
    version: str | None = None
    follows_changes = True

    def build(self, d: Declaration, output: OutputTable, rules: tuple[Rule, ...], call: Callable) -> Built:
        mode = "append" if d.source is not None else "update"
        return Built(UpsertSink(keys=self.keys, version_column=self.version), mode, checks=(unique(*self.keys),))


@dataclass(frozen=True)
class Replace(Kind):
    """The whole result replaces the table each run (complete mode)."""

    follows_changes = True

    def build(self, d: Declaration, output: OutputTable, rules: tuple[Rule, ...], call: Callable) -> Built:
        checks = (unique(*d.keys),) if d.keys else ()
        return Built(OverwriteSink(), "complete", checks=checks)


@dataclass(frozen=True)
class Cdc(Kind):
    """A change feed applied as SCD type 1 (the table) and SCD type 2 (`<table>_history`)."""

    key: str = ""
    sequence: str = ""
    op: str = "op"
    time: str = "changed_at"
    values: tuple[str, ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:  # type: ignore[override]
        return (self.key,)

    def _typed(self, schema: StructType, d: Declaration) -> list[StructField]:
        missing = [c for c in (self.key, self.sequence, self.op, self.time, *self.values) if c not in schema.names]
        if missing:
            raise d.error(f"cdc names column(s) {', '.join(missing)} the input does not have", "name input columns")
        return [schema[c] for c in (self.key, *self.values)]

    def finish(self, d: Declaration, schema: StructType) -> StructType:
        typed = self._typed(schema, d)
        return StructType(
            [*typed, StructField("last_sequence", LongType()), StructField("updated_at", TimestampType())]
        )

    def build(self, d: Declaration, output: OutputTable, rules: tuple[Rule, ...], call: Callable) -> Built:
        history = OutputTable(
            f"{d.name}_history",
            infer=lambda: StructType(
                [
                    *output.schema.fields[: 1 + len(self.values)],
                    StructField(self.sequence, LongType()),
                    StructField("valid_from", TimestampType()),
                    StructField("valid_to", TimestampType()),
                    StructField("is_current", BooleanType()),
                    StructField("is_deleted", BooleanType()),
                ]
            ),
        )
        sink = CdcSink(
            history_table=history.name,
            key=self.key,
            sequence=self.sequence,
            op_column=self.op,
            time_column=self.time,
            value_columns=self.values,
        )
        return Built(sink, extra_outputs=(history,), checks=(unique(self.key),))


def _names(columns: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return (columns,) if isinstance(columns, str) else tuple(columns)


def append() -> Kind:
    """Append every row (the default)."""
    return Append()


def dedupe(*keys: str, time: str, order_by: tuple[str, ...] = ("_source_file",)) -> Kind:
    """Validate rows by the table's rules (failures to `<table>_quarantine`) and keep the first row per key.

    `time` is the event-time column duplicates share (the check against stored rows reads only its range).
    """
    return Dedupe(keys=keys, time=time, order_by=order_by)


def recompute(by: str | tuple[str, ...], keys: str | tuple[str, ...], where: str | None = None) -> Kind:
    """Keep a gold table exact: the function gets the upstream rows of every `by` value a batch touches (read
    whole, with reference tables) and returns the complete rows for them, merged by `keys`.

    `where` (Spark SQL) limits the touched values to those of matching rows: rows the function leaves out
    touch nothing.
    """
    return Recompute(by=_names(by), keys=_names(keys), where=where)


def upsert(*keys: str, version: str | None = None) -> Kind:
    """MERGE each batch by `keys` (update-mode windows, reference tables); `version` keeps the newest row."""
    return Upsert(keys=keys, version=version)


def replace() -> Kind:
    """Replace the table with the query's whole result every run (a streaming aggregate in complete mode)."""
    return Replace()


def cdc(key: str, sequence: str, values: tuple[str, ...], op: str = "op", time: str = "changed_at") -> Kind:
    """Apply a change feed (`op` I/U/D ordered by `sequence`) as SCD1 and SCD2 (`<table>_history`)."""
    return Cdc(key=key, sequence=sequence, op=op, time=time, values=tuple(values))
