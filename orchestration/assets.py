"""Asset factory: one Dagster asset per registry table (a multi-asset where a spec writes several tables).

Every table asset is in the `tributary_tables` concurrency pool (one run at a time may hold it, see
infra/dagster.yaml), retries transient errors with backoff, and turns a TributaryError into a failure without
retries. Day-partitioned gold tables (see `orchestration.partitions`) are daily-partitioned assets: a run without
a partition key is the incremental run, a run for a day or a range of days (one run per backfill) recomputes
exactly those days.
"""

# No `from __future__ import annotations`: Dagster inspects the `context` annotation at definition time.

from collections.abc import Iterator
from datetime import UTC, datetime

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetMaterialization,
    AssetSpec,
    BackfillPolicy,
    Backoff,
    DailyPartitionsDefinition,
    Failure,
    MaterializeResult,
    MetadataValue,
    RetryPolicy,
    multi_asset,
)

from infra.errors import TributaryError
from infra.settings import Settings
from orchestration.metadata import range_metadata, report_metadata
from orchestration.partitions import daily_partitions, partition_days
from orchestration.resources import SparkResource
from pipelines.io.partition_grain import described
from pipelines.ops.backfill import backfill_days, backfillable_day_column
from pipelines.run.run_log import run_context
from pipelines.run.runner import run_table
from pipelines.spec.registry import Registry
from pipelines.spec.tables import TableSpec
from pipelines.write.ranges import changed_days

KINDS = {"spark", "iceberg"}
# The run tag naming what launched a run (a sensor's name); runs without it are logged as triggered by `dagster`.
TRIGGER_TAG = "tributary/trigger"
# One pool for everything that writes tables or checkpoints: at most one such run at a time (infra/dagster.yaml).
TABLE_POOL = "tributary_tables"
# Transient errors (a JVM that did not come up, a busy catalog) are retried after 10 s, then 30 s (exponential
# backoff); TributaryErrors never are. No jitter: runs that write tables go one at a time anyway.
RETRY_POLICY = RetryPolicy(max_retries=2, delay=10, backoff=Backoff.EXPONENTIAL)


def asset_key(table: str) -> AssetKey:
    """`silver.events` → AssetKey(["silver", "events"])."""
    return AssetKey(table.split("."))


def no_retry_failure(exc: TributaryError) -> Failure:
    """A Dagster failure for an error a person must fix: shown as the step's error, never retried."""
    return Failure(description=str(exc), metadata={"error": type(exc).__name__}, allow_retries=False)


def _extra_description(spec: TableSpec, table: str) -> str:
    if table.endswith("_quarantine"):
        return f"Rows rejected by {spec.name}'s rules, with the rule names and the original record."
    if table.endswith("_late"):
        return f"Input rows of {spec.name} that arrived behind its watermark (kept, not lost)."
    return f"Written by {spec.name}'s run alongside it."


def build_table_asset(spec: TableSpec, partitions: DailyPartitionsDefinition | None = None):
    """The asset (or multi-asset) that runs one spec incrementally (and backfills days, when partitioned)."""
    deps = [asset_key(name) for name in spec.upstreams]
    day = backfillable_day_column(spec) if partitions is not None else None
    partitioned = day is not None
    specs = [
        AssetSpec(
            key=asset_key(out.name),
            deps=deps,
            group_name=spec.layer,
            kinds=KINDS,
            description=spec.description if out is spec.output else _extra_description(spec, out.name),
            metadata={
                "table": out.name,
                "partitioned_by": described(
                    out.partition_by, out.grain_from, (day,) if day and out is spec.output else ()
                ),
            },
        )
        for out in spec.outputs()
    ]

    @multi_asset(
        name=spec.name.replace(".", "__"),
        specs=specs,
        compute_kind=None,
        pool=TABLE_POOL,
        retry_policy=RETRY_POLICY,
        partitions_def=partitions if partitioned else None,
        backfill_policy=BackfillPolicy.single_run() if partitioned else None,
        # A table selected alone (`--select silver/events`) still writes its companions in the same transaction:
        # the run writes them all, and those not selected are logged as materializations of this run.
        can_subset=True,
    )
    def _asset(context: AssetExecutionContext, spark: SparkResource) -> Iterator[MaterializeResult]:
        settings = spark.settings()
        started = datetime.now(UTC)
        trigger = context.run.tags.get(TRIGGER_TAG, "dagster")
        try:
            # Logged in ops.run_log under Dagster's run id (a backfill of days too).
            with run_context(context.run_id, trigger):
                # A single-day run has a partition key; a single-run backfill of several days has a key range.
                if partitioned and (context.has_partition_key or context.has_partition_key_range):
                    start, end = partition_days(context)
                    backfill = backfill_days(spark.session(), settings, spec, start, end)
                else:
                    backfill = None
                    report = run_table(spark.session, settings, spec)  # the session starts only if there is work
        except TributaryError as exc:
            raise no_retry_failure(exc) from exc
        if backfill is not None:
            results = {spec.name: range_metadata(backfill)}
        else:
            for line in report.file_problems():
                context.log.warning(line)
            if partitioned and not report.skipped:
                _log_changed_days(context, spark, settings, spec, started)
            results = {out.name: report_metadata(report, out.name) for out in spec.outputs()}
        selected = context.selected_asset_keys
        for name, metadata in results.items():
            if asset_key(name) in selected:
                yield MaterializeResult(asset_key=asset_key(name), metadata=metadata)
            else:
                context.log_event(AssetMaterialization(asset_key=asset_key(name), metadata=metadata))
        for out in spec.outputs():  # a companion selected alone in a day backfill: the backfill wrote no rows to it
            if out.name not in results and asset_key(out.name) in selected:
                yield MaterializeResult(asset_key=asset_key(out.name))

    return _asset


def _log_changed_days(
    context: AssetExecutionContext,
    spark: SparkResource,
    settings: Settings,
    spec: TableSpec,
    since: datetime,
) -> None:
    """Record the days an incremental run changed as materialized partitions, so the UI shows which days hold data.

    The partitions are taken after the run: its first rows move the home's first data day (`orchestration.partitions`)
    earlier than the definitions loaded before it knew."""
    known = set(daily_partitions(settings).get_partition_keys())
    for day in changed_days(spark.session(), settings, spec.output, since):
        if day.isoformat() in known:
            context.log_event(
                AssetMaterialization(
                    asset_key=asset_key(spec.name),
                    partition=day.isoformat(),
                    metadata={"written_by": MetadataValue.text("incremental run")},
                )
            )


def build_table_assets(registry: Registry, settings: Settings | None = None) -> list:
    """One asset definition per spec in the registry; day-partitioned gold tables get daily partitions."""
    partitions = daily_partitions(settings or Settings.from_env())
    return [build_table_asset(spec, partitions) for spec in registry]
