"""The numbers a pipeline reconciliation compares, counted over whole tables or over what was appended since the
last reconciliation that passed.

A full count re-validates every bronze row silver has read and groups them by record. Once a count has passed,
its numbers are facts about immutable snapshots (bronze at silver's position, silver, quarantine): when every
snapshot of the three tables since then only appended rows or compacted files, the next count adds what the new
snapshots appended, re-validated with the same rules, and looks up only their keys (and rejected records) among
the rows counted before. Anything else (a reprocess, a full refresh, expired snapshots, changed rules) counts
everything again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from infra.settings import Settings
from pipelines.io.formats import table_format
from pipelines.spec.rules import passes_rules
from pipelines.spec.tables import TableSpec
from pipelines.write.validate import QUARANTINE_IDENTITY, ValidateDedupeSink, quarantine_identity

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from quality.results import CheckResult


@dataclass(frozen=True)
class Counts:
    """A pipeline's reconciliation numbers and the snapshots they were counted at."""

    bronze_snapshot: int | None  # bronze as silver's stream has read it
    silver_snapshot: int | None
    quarantine_snapshot: int | None
    rows: int  # bronze rows
    valid: int  # bronze rows passing the rules
    distinct_valid: int  # distinct keys among them
    distinct_invalid: int  # distinct rejected records (rows, when the quarantine keeps no record identity)
    silver_rows: int
    silver_keys: int
    quarantined: int
    # The three tables' identities (`TableFormat.table_id`): snapshot ids of tables since created again are others'.
    tables_id: str = ""
    incremental: bool = False
    # Invalid rows as the batches recorded them (`quality.pipeline_ledger`); None: bronze rows minus valid ones.
    invalid: int | None = None

    def state(self) -> dict[str, int | str | None]:
        """What a later count can start from (kept with the check's result)."""
        return {k: v for k, v in asdict(self).items() if k not in ("incremental", "invalid")}

    @property
    def rejected(self) -> int:
        """The bronze rows failing the rules."""
        return self.rows - self.valid if self.invalid is None else self.invalid


@dataclass(frozen=True)
class Tables:
    """The three tables of a pipeline, at the snapshots counted now."""

    bronze: str
    silver: TableSpec
    sink: ValidateDedupeSink
    bronze_snapshot: int | None
    silver_snapshot: int | None
    quarantine_snapshot: int | None
    tables_id: str

    @property
    def identity(self) -> str | None:
        """The column that identifies a rejected record (a record sent again is a duplicate), if kept."""
        return QUARANTINE_IDENTITY if QUARANTINE_IDENTITY in self.sink.quarantine_columns else None


def at(spark: SparkSession, settings: Settings, table: str, snapshot: int | None) -> DataFrame:
    """`table` at `snapshot` (no rows when None: nothing read or written yet)."""
    fmt = table_format(settings)
    if snapshot is None:
        return fmt.read(spark, table).limit(0)
    return fmt.read(spark, table, snapshot)


def full_counts(spark: SparkSession, settings: Settings, t: Tables) -> Counts:
    """Count every row of the three tables."""
    keys, identity, is_valid = list(t.sink.keys), t.identity, passes_rules()
    seen = t.silver.transform(at(spark, settings, t.bronze, t.bronze_snapshot))
    # One grouping by record (a valid row's key, an invalid row's identity), then sums over the groups: two
    # count_distinct would read every bronze row twice (Spark expands the rows once per distinct aggregate).
    records = seen.groupBy(
        is_valid.alias("_valid"),
        F.when(is_valid, F.struct(*keys)).alias("_key"),
        (F.when(~is_valid, quarantine_identity(seen)) if identity else F.lit(None)).alias("_identity"),
    ).agg(F.count(F.lit(1)).alias("_rows"))
    valid_group, invalid_group, rows_of = F.col("_valid"), ~F.col("_valid"), F.col("_rows")
    distinct_invalid = (
        F.count(F.when(invalid_group & F.col("_identity").isNotNull(), 1))
        if identity
        else F.sum(F.when(invalid_group, rows_of))
    )
    b = records.agg(
        F.coalesce(F.sum(rows_of), F.lit(0)).alias("rows"),
        F.coalesce(F.sum(F.when(valid_group, rows_of)), F.lit(0)).alias("valid"),
        F.count(F.when(valid_group, 1)).alias("distinct_valid"),
        F.coalesce(distinct_invalid, F.lit(0)).alias("distinct_invalid"),
    ).collect()[0]
    silver = at(spark, settings, t.silver.name, t.silver_snapshot)
    s = silver.agg(F.count(F.lit(1)).alias("rows"), F.count_distinct(F.struct(*keys)).alias("keys")).collect()[0]
    return Counts(
        t.bronze_snapshot,
        t.silver_snapshot,
        t.quarantine_snapshot,
        rows=int(b["rows"]),
        valid=int(b["valid"]),
        distinct_valid=int(b["distinct_valid"]),
        distinct_invalid=int(b["distinct_invalid"]),
        silver_rows=int(s["rows"]),
        silver_keys=int(s["keys"]),
        quarantined=at(spark, settings, t.sink.quarantine_table, t.quarantine_snapshot).count(),
        tables_id=t.tables_id,
    )


def passed_counts(result: CheckResult | None, rules: str) -> Counts | None:
    """The counts of `result` when it passed under the same rules (`rules`: the digest of the rules and
    transform that decide validity), else None."""
    if result is None or not result.passed or not result.state or result.inputs.get("rules") != rules:
        return None
    try:
        return Counts(**result.state)  # type: ignore[arg-type]
    except TypeError:  # written by another version
        return None


def counts_since(spark: SparkSession, settings: Settings, t: Tables, before: Counts) -> Counts | None:
    """`before` plus what the three tables appended since: None when one of them did anything but append (or
    was created again)."""
    if before.tables_id != t.tables_id:
        return None
    fmt = table_format(settings)
    new_bronze = fmt.appended_rows(spark, t.bronze, before.bronze_snapshot, t.bronze_snapshot)
    new_silver = fmt.appended_rows(spark, t.silver.name, before.silver_snapshot, t.silver_snapshot)
    new_quarantine = fmt.appended_rows(
        spark, t.sink.quarantine_table, before.quarantine_snapshot, t.quarantine_snapshot
    )
    if new_bronze is None or new_silver is None or new_quarantine is None:
        return None
    keys, identity, is_valid = list(t.sink.keys), t.identity, passes_rules()
    seen = t.silver.transform(new_bronze).withColumn("_valid", is_valid).persist()
    try:
        b = seen.agg(
            F.count(F.lit(1)).alias("rows"), F.coalesce(F.sum(F.col("_valid").cast("long")), F.lit(0)).alias("valid")
        ).collect()[0]
        new_keys = seen.filter("_valid").select(*keys).distinct()
        added_keys = new_silver.select(*keys)
        # The keys counted before, looked up for the new keys only (a semi join: only matches travel).
        old = at(spark, settings, t.silver.name, before.silver_snapshot).select(*keys)
        known = old.join(new_keys.unionByName(added_keys).distinct(), keys, "left_semi").persist()
        try:
            distinct_valid = new_keys.join(known, keys, "left_anti").count()
            silver_rows = added_keys.count()
            silver_keys = added_keys.distinct().join(known, keys, "left_anti").count()
        finally:
            known.unpersist()
        if identity:
            rejected = seen.filter(~F.col("_valid")).select(quarantine_identity(seen).alias(identity)).distinct()
            stored = at(spark, settings, t.sink.quarantine_table, before.quarantine_snapshot).select(identity)
            distinct_invalid = rejected.join(stored, identity, "left_anti").count()
        else:
            distinct_invalid = int(b["rows"]) - int(b["valid"])
    finally:
        seen.unpersist()
    return replace(
        before,
        bronze_snapshot=t.bronze_snapshot,
        silver_snapshot=t.silver_snapshot,
        quarantine_snapshot=t.quarantine_snapshot,
        rows=before.rows + int(b["rows"]),
        valid=before.valid + int(b["valid"]),
        distinct_valid=before.distinct_valid + distinct_valid,
        distinct_invalid=before.distinct_invalid + distinct_invalid,
        silver_rows=before.silver_rows + silver_rows,
        silver_keys=before.silver_keys + silver_keys,
        quarantined=before.quarantined + new_quarantine.count(),
        incremental=True,
    )
