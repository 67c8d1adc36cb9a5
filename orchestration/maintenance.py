"""Maintenance assets (one per table), the nightly schedule, and the compaction sensor.

The Spark work lives in `pipelines.ops.maintenance`; this module only turns the registry into Dagster definitions.
Each maintenance asset materializes the table's shape before and after (data files, average file size,
manifests, snapshots, bytes on disk, rows, seconds) so the UI can plot them over time.
"""

# No `from __future__ import annotations` here: Dagster reads the asset's config annotation at definition time.
from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetSelection,
    Config,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    MaterializeResult,
    MetadataValue,
    RunRequest,
    ScheduleDefinition,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    asset,
    define_asset_job,
    in_process_executor,
    sensor,
)
from pydantic import Field

from orchestration.assets import KINDS, asset_key
from orchestration.metadata import as_metadata
from orchestration.resources import SparkResource
from pipelines.ops.maintenance.policies import maintained_tables
from pipelines.ops.maintenance.procedures import COMPACTION_OPERATIONS, OPERATIONS
from pipelines.ops.maintenance.runner import MaintenanceReport, run_maintenance
from pipelines.ops.table_health import compaction_reason, file_health
from pipelines.spec.registry import Registry
from pipelines.spec.tables import MaintenancePolicy

MAINTENANCE_GROUP = "maintenance"
MAINTENANCE_JOB = "tributary_maintenance"
SENSOR_INTERVAL_SECONDS = 600


class MaintenanceConfig(Config):
    """Which maintenance operations a run performs (default: all, in their fixed order)."""

    operations: list[str] = Field(
        default_factory=lambda: list(OPERATIONS),
        description=f"Any of {', '.join(OPERATIONS)} (the compaction sensor asks for the first two).",
    )


def maintenance_key(table: str) -> AssetKey:
    """`bronze.events` → AssetKey(["maintenance", "bronze__events"])."""
    return AssetKey([MAINTENANCE_GROUP, table.replace(".", "__")])


def maintenance_op_name(table: str) -> str:
    """The op name Dagster derives from the maintenance asset key (used to address its run config)."""
    return "__".join(maintenance_key(table).path)


def maintenance_metadata(report: MaintenanceReport) -> dict[str, MetadataValue]:
    """The report's numbers as plottable metadata, plus the operations run and any notes."""
    meta = as_metadata({"operations": ", ".join(report.operations), **report.numbers()})
    if report.notes:
        meta["notes"] = MetadataValue.text("\n".join(report.notes))
    if report.skipped:
        meta["skipped"] = MetadataValue.text(report.skipped)
    return meta


def build_maintenance_asset(registry: Registry, table: str, policy: MaintenancePolicy):
    """The asset that maintains one table according to its policy."""
    retention = (
        f"snapshots kept {policy.snapshot_retention_days} days and at least the last {policy.min_snapshots_to_keep}; "
        f"orphan files removed after {policy.orphan_retention_days} days"
    )

    written = {out.name for spec in registry for out in spec.outputs()}

    @asset(
        key=maintenance_key(table),
        deps=[asset_key(table)] if table in written else [],  # the run log is no asset: runs append to it
        group_name=MAINTENANCE_GROUP,
        kinds=KINDS,
        description=f"Compaction, manifest rewrite, snapshot expiry and orphan removal for {table} ({retention}).",
        metadata={"table": table},
    )
    def _maintain(context: AssetExecutionContext, config: MaintenanceConfig, spark: SparkResource) -> MaterializeResult:
        report = run_maintenance(spark.session(), spark.settings(), registry, table, config.operations)
        for note in report.notes:
            context.log.warning(note)
        return MaterializeResult(metadata=maintenance_metadata(report))

    return _maintain


def build_maintenance_assets(registry: Registry) -> list:
    """One maintenance asset per table the registry writes (quarantine tables included)."""
    return [build_maintenance_asset(registry, table, policy) for table, policy in maintained_tables(registry)]


maintenance_job = define_asset_job(
    MAINTENANCE_JOB,
    selection=AssetSelection.groups(MAINTENANCE_GROUP),
    executor_def=in_process_executor,
    description="Maintain every table (or the sensor's selection) in one process sharing one SparkSession.",
)

maintenance_schedule = ScheduleDefinition(
    name="tributary_nightly_maintenance",
    job=maintenance_job,
    cron_schedule="0 3 * * *",
    execution_timezone="UTC",
    default_status=DefaultScheduleStatus.RUNNING,
    description="Nightly: compact, rewrite manifests, expire snapshots and remove orphan files on every table.",
)


def build_compaction_sensor(registry: Registry, name: str = "compaction_sensor") -> SensorDefinition:
    """A sensor that requests compaction for tables whose small files cross their policy's thresholds.

    It reads manifests through pyiceberg (no JVM). One run covers every table due, keyed by their snapshot ids
    so the same table state never triggers twice.
    """

    @sensor(
        name=name,
        job=maintenance_job,
        minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
        default_status=DefaultSensorStatus.STOPPED,
        description="Requests compaction when a table's small-file count or average file size crosses its policy.",
    )
    def _sensor(context: SensorEvaluationContext, spark: SparkResource) -> RunRequest | SkipReason:
        settings = spark.settings()
        due = []
        for table, policy in maintained_tables(registry):
            health = file_health(settings, table, policy)
            reason = compaction_reason(health, policy) if health is not None else None
            if reason:
                context.log.info(f"{table}: {reason}")
                due.append((table, health.snapshot_id, reason))
        if not due:
            return SkipReason("no table has enough small files to compact")
        config = {"config": {"operations": list(COMPACTION_OPERATIONS)}}
        return RunRequest(
            run_key=",".join(f"{table}@{snapshot}" for table, snapshot, _ in due),
            asset_selection=[maintenance_key(table) for table, _, _ in due],
            run_config={"ops": {maintenance_op_name(table): config for table, _, _ in due}},
            tags={"tributary/trigger": name},
        )

    return _sensor
