"""Reconciliation: every landed line is accounted for exactly once, and gold totals equal their upstream.

Per pipeline (a validating spec — `ValidateDedupeSink` — whose upstream reads landed files or Kafka):

- landed lines = bronze rows, per file, for the files bronze's stream has committed (counted in Python from the
  landing files; files landed since are reported as pending, not as a failure); for a Kafka-fed bronze, each
  committed offset once per partition (`pipelines.sources.kafka_offsets`);
- bronze = silver + quarantine + duplicates, where bronze is the table as the validating stream has read it
  (the snapshot in its checkpoint) and duplicates are derived from bronze itself: valid rows minus distinct
  valid keys plus invalid rows minus distinct invalid records (`raw_record`), with validity re-evaluated by
  the spec's own transform and rules;
- silver holds each distinct valid key exactly once.

Per `totals_match_upstream` expectation: each measure of the table, per key, equals the aggregate over the
upstream table, as the table's own stream has read it or as it is now (what a backfill recomputes from).

The split of bronze's rows is read from the commits when every silver and quarantine commit records it (each
in the same commit as its rows, `quality.pipeline_ledger`); a deep check, or any other history, re-validates
bronze with the spec's own transform and rules and counts every row.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

from pyspark.sql import functions as F

from infra.errors import ConfigError
from infra.settings import Settings
from infra.spark import Session, running_session, started_session
from pipelines.io.formats import table_format
from pipelines.sources.kinds import accounting, kind_of
from pipelines.spec.expectations import Expectation
from pipelines.spec.registry import Registry
from pipelines.spec.rules import passes_rules
from pipelines.spec.tables import MAIN_FLOW, TableSpec
from pipelines.write.validate import ValidateDedupeSink
from quality.gx_runner import require_table
from quality.inputs import (
    carried_over,
    code_version,
    digest,
    files_version,
    position_version,
    read_files_version,
    snapshot_versions,
)
from quality.pipeline_counts import Tables, at, counts_since, full_counts, passed_counts
from quality.pipeline_ledger import ledger_counts
from quality.results import MAX_SAMPLES, CheckResult, Outcome, latest_result, plain

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

CHECK_NAME = "reconciliation"


@dataclass(frozen=True)
class Pipeline:
    """The tables one landing folder flows through: files → bronze → a validating (silver) table."""

    bronze: TableSpec
    silver: TableSpec

    @property
    def sink(self) -> ValidateDedupeSink:
        """The validating sink (quarantine table, keys)."""
        return cast(ValidateDedupeSink, self.silver.sink)


def pipelines_of(registry: Registry) -> list[Pipeline]:
    """Every validating spec whose upstream reads landed files."""
    found = []
    for spec in registry:
        # A transform with secondary inputs cannot be re-applied to a static bronze frame alone.
        if spec.sink.quarantines and spec.upstream is not None and not spec.upstreams[1:]:
            bronze = registry.get(spec.upstream)
            if bronze.source.lands:
                found.append(Pipeline(bronze, spec))
    return found


def totals_expectations(spec: TableSpec) -> list[Expectation]:
    """The spec's `totals_match_upstream` expectations."""
    return [e for e in spec.expectations if e.kind == "totals_match_upstream"]


def reconcile_pipeline(session: Session, settings: Settings, pipeline: Pipeline, deep: bool = False) -> CheckResult:
    """Check that every landed line of the pipeline is in exactly one of silver, quarantine or duplicates.

    The split of bronze's rows is read from what silver's batches recorded in their commits when they all did
    (`quality.pipeline_ledger`); `deep` (or any commit without that record) re-validates and counts the rows.
    `session` (`infra.spark.Session`) is started only when the result cannot be carried over.
    """
    started = time.perf_counter()
    fmt = table_format(settings)
    silver, sink = pipeline.silver, pipeline.sink
    running = running_session(session)
    for name in (pipeline.bronze.name, silver.name, sink.quarantine_table):
        require_table(running, settings, name)
    inputs = {**_pipeline_inputs(running, settings, pipeline), "counted": "rows" if deep else "commits"}
    carried = carried_over(settings, silver.name, CHECK_NAME, inputs)
    if carried is not None:
        return carried
    spark = started_session(session, settings)
    keys = list(sink.keys)
    delivered = accounting(spark, settings, pipeline.bronze)
    notes = delivered.notes
    landed_outcome = Outcome(
        name=delivered.name,
        severity="error",
        success=delivered.success,
        observed=delivered.observed,
        element_count=delivered.element_count,
        unexpected_count=delivered.unexpected_count,
        samples=delivered.samples[:MAX_SAMPLES],
    )

    position = fmt.consumer_position(pipeline.bronze.name, silver.name, settings.checkpoint_for(silver.name))
    if position.snapshot_id is not None and not position.committed:
        notes.append(f"{silver.name}'s last batch is uncommitted; re-run it before trusting this reconciliation")
    silver_now, quarantine_now = (fmt.current_snapshot(spark, name) for name in (silver.name, sink.quarantine_table))
    tables = Tables(
        pipeline.bronze.name,
        silver,
        sink,
        bronze_snapshot=position.snapshot_id,
        silver_snapshot=silver_now and silver_now.snapshot_id,
        quarantine_snapshot=quarantine_now and quarantine_now.snapshot_id,
        tables_id="/".join(
            fmt.table_id(spark, name) for name in (pipeline.bronze.name, silver.name, sink.quarantine_table)
        ),
    )
    latest = latest_result(settings, silver.name, CHECK_NAME)
    # A deep count starts only from an earlier count of rows, never from numbers read from the commits.
    counted_rows = latest is not None and latest.inputs.get("counted", "rows") == "rows"
    before = passed_counts(latest, inputs["rules"]) if counted_rows or not deep else None
    counts = (
        (None if deep else ledger_counts(spark, settings, tables, before))
        or (counts_since(spark, settings, tables, before) if before else None)
        or full_counts(spark, settings, tables)
    )
    if counts.invalid is not None:
        notes.append(
            f"counted from the commits of {silver.name} and {sink.quarantine_table}: each records the bronze rows "
            "its batch read (no row read again; 'tributary quality check --deep' re-validates and counts every row)"
        )
    if counts.incremental:
        notes.append(
            f"counted the rows appended since the last reconciliation that passed (bronze snapshot "
            f"{before and before.bronze_snapshot}), on top of its counts"
        )
    bronze_rows, valid, distinct_valid = counts.rows, counts.valid, counts.distinct_valid
    silver_rows, silver_keys, quarantined = counts.silver_rows, counts.silver_keys, counts.quarantined
    invalid, distinct_invalid = counts.rejected, counts.distinct_invalid
    duplicates = valid - distinct_valid + invalid - distinct_invalid
    accounted = silver_rows + quarantined + duplicates
    gap = bronze_rows - accounted
    balance = Outcome(
        name=f"{pipeline.bronze.name} = {silver.name} + {sink.quarantine_table} + duplicates",
        severity="error",
        success=gap == 0,
        observed=f"{bronze_rows} = {silver_rows} + {quarantined} + {duplicates}"
        + ("" if gap == 0 else f" ({gap} rows lost)" if gap > 0 else f" ({-gap} rows too many)"),
        element_count=bronze_rows,
        unexpected_count=abs(gap),
        unexpected_percent=round(100.0 * abs(gap) / bronze_rows, 4) if bronze_rows else 0.0,
    )
    quarantine = Outcome(
        name=f"{sink.quarantine_table} = distinct bronze records failing the rules of {silver.name}",
        severity="error",
        success=quarantined == distinct_invalid,
        observed=f"{quarantined} quarantined, {distinct_invalid} distinct bronze records fail the rules "
        f"({invalid} rows)",
        unexpected_count=abs(quarantined - distinct_invalid),
    )
    lost = Outcome(
        name=f"{silver.name} holds every distinct valid {', '.join(keys)}",
        severity="error",
        success=silver_rows == distinct_valid and silver_keys == silver_rows,
        observed=(
            f"{silver_rows} rows, {silver_keys} distinct keys, {distinct_valid} distinct valid keys in bronze"
            if counts.invalid is None
            else f"{silver_rows} rows, each the first copy of its key among the {valid} valid rows its batches read"
        ),
        element_count=distinct_valid,
        unexpected_count=abs(distinct_valid - silver_keys) + (silver_rows - silver_keys),
    )
    if not lost.success:
        silver_df = at(spark, settings, silver.name, tables.silver_snapshot)
        seen = silver.transform(at(spark, settings, pipeline.bronze.name, tables.bronze_snapshot))
        valid_keys = seen.filter(passes_rules()).select(*keys).distinct()
        missing = valid_keys.join(silver_df.select(*keys), keys, "left_anti").limit(MAX_SAMPLES).collect()
        doubled = silver_df.groupBy(*keys).count().filter("count > 1").limit(MAX_SAMPLES).collect()
        lost.samples = [f"missing {_key(r, keys)}" for r in missing] + [
            f"{r['count']}x {_key(r, keys)}" for r in doubled
        ]
        lost.samples = lost.samples[:MAX_SAMPLES]
    return CheckResult(
        table=silver.name,
        check=CHECK_NAME,
        severity="error",
        checked_at=datetime.now(UTC).isoformat(timespec="seconds"),
        seconds=round(time.perf_counter() - started, 3),
        outcomes=[landed_outcome, balance, quarantine, lost],
        snapshot_id=None if position.snapshot_id is None else str(position.snapshot_id),
        rows_checked=bronze_rows,
        engine="spark",
        notes=notes,
        inputs=inputs,
        state=counts.state(),
    )


def _pipeline_inputs(spark: SparkSession | None, settings: Settings, pipeline: Pipeline) -> dict[str, str]:
    """What the pipeline reconciliation reads: three tables, silver's position, the landed and read files, and
    the rules and transform that decide validity."""
    silver, sink, bronze = pipeline.silver, pipeline.sink, pipeline.bronze
    inputs = {
        "rules": digest((sink.rules, sink.keys, sink.quarantine_columns, code_version(silver.transform))),
        **snapshot_versions(spark, settings, [pipeline.bronze.name, silver.name, sink.quarantine_table]),
        **position_version(settings, silver.name),
    }
    for flow in bronze.all_flows():
        received = kind_of(flow.source).received_files(settings)
        if received is not None:  # (a Kafka-fed flow keeps its offsets in the table's snapshots)
            key = bronze.name if flow.name == MAIN_FLOW else f"{bronze.name}/{flow.name}"
            inputs.update(files_version(key, received))
            inputs.update(read_files_version(settings, bronze.name, flow.name))
    return inputs


def _key(row, keys: list[str]) -> str:
    return ", ".join(f"{k}={plain(row[k])}" for k in keys)


def reconcile_totals(session: Session, settings: Settings, spec: TableSpec) -> CheckResult:
    """Check each `totals_match_upstream` expectation of `spec`: its measures per key equal the upstream's.

    A key passes when the table's values equal the upstream's as the table's stream last read it, or the
    upstream's current values (what a backfill or reprocess recomputes from); lost or doubled rows match neither.
    `session` (`infra.spark.Session`) is started only when the result cannot be carried over.
    """
    started = time.perf_counter()
    expectations = totals_expectations(spec)
    if not expectations:
        raise ConfigError(f"table {spec.name} declares no totals_match_upstream expectation")
    if not spec.keys:
        raise ConfigError(f"table {spec.name}: totals_match_upstream needs the spec's keys to compare per key")
    fmt = table_format(settings)
    upstreams = sorted({e.upstream for e in expectations if e.upstream})
    running = running_session(session)
    for name in (spec.name, *upstreams):
        require_table(running, settings, name)
    inputs = {
        "suite": digest(expectations),
        **snapshot_versions(running, settings, [spec.name, *upstreams]),
        **position_version(settings, spec.name),
    }
    carried = carried_over(settings, spec.name, CHECK_NAME, inputs)
    if carried is not None:
        return carried
    spark = started_session(session, settings)
    checkpoint = settings.checkpoint_for(spec.name)
    positions = {u: fmt.consumer_position(u, spec.name, checkpoint).snapshot_id for u in upstreams}
    outcomes = [
        _totals_outcome(spark, settings, spec, exp, positions[exp.upstream])
        for exp in expectations
        if exp.upstream is not None
    ]
    return CheckResult(
        table=spec.name,
        check=CHECK_NAME,
        severity="error" if any(e.severity == "error" for e in expectations) else "warn",
        checked_at=datetime.now(UTC).isoformat(timespec="seconds"),
        seconds=round(time.perf_counter() - started, 3),
        outcomes=outcomes,
        snapshot_id=None if (stats := fmt.stats(spark, spec.name)).snapshot_id is None else str(stats.snapshot_id),
        rows_checked=stats.rows,
        engine="spark",
        notes=[f"{spec.name}'s stream has read {u} up to snapshot {p}" for u, p in positions.items()],
        inputs=inputs,
    )


def _totals_outcome(
    spark: SparkSession, settings: Settings, spec: TableSpec, exp: Expectation, seen_snapshot: int | None
) -> Outcome:
    assert exp.upstream is not None
    keys, measures = list(spec.keys), [column for column, _ in exp.measures]

    def aggregated(df: DataFrame) -> DataFrame:
        if exp.where:
            df = df.filter(F.expr(exp.where))
        return df.groupBy(*keys).agg(*[F.expr(agg).alias(column) for column, agg in exp.measures])

    fmt = table_format(settings)
    sources = {
        "table": fmt.read(spark, spec.name).select(*keys, *measures),
        "seen": aggregated(at(spark, settings, exp.upstream, seen_snapshot)),
        "now": aggregated(fmt.read(spark, exp.upstream)),
    }
    tagged = [df.withColumn("_source", F.lit(name)) for name, df in sources.items()]
    union = tagged[0].unionByName(tagged[1]).unionByName(tagged[2])
    # groupBy puts NULL keys together; a sum per source exposes a key the table holds twice.
    wide = union.groupBy(*keys).agg(
        *[F.sum(F.when(F.col("_source") == name, F.col(m))).alias(f"{name}__{m}") for name in sources for m in measures]
    )

    def matches(other: str) -> Column:
        same = F.lit(True)
        for m in measures:
            same = same & F.col(f"table__{m}").eqNullSafe(F.col(f"{other}__{m}"))
        return same

    compared = wide.withColumn("_differs", ~matches("seen") & ~matches("now"))
    stats = compared.agg(F.count(F.lit(1)).alias("keys"), F.sum(F.col("_differs").cast("long")).alias("bad")).first()
    bad, total = int(stats["bad"] or 0), int(stats["keys"])
    outcome = Outcome(
        name=exp.label,
        severity=exp.severity,
        success=bad == 0,
        observed=f"{total - bad} of {total} keys match {exp.upstream}",
        element_count=total,
        unexpected_count=bad,
        unexpected_percent=round(100.0 * bad / total, 4) if total else 0.0,
    )
    if bad:
        rows = compared.filter("_differs").limit(MAX_SAMPLES).collect()
        outcome.samples = [_difference(r, keys, measures, exp.upstream) for r in rows]
    return outcome


def _difference(row, keys: list[str], measures: list[str], upstream: str) -> str:
    values = "; ".join(f"{m} {plain(row['table__' + m])} vs {plain(row['now__' + m])} in {upstream}" for m in measures)
    return f"{_key(row, keys)}: {values}"
