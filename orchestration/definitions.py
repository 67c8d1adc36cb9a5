"""The Dagster `Definitions` of the platform, built from the table registry."""

from __future__ import annotations

from dagster import AssetSelection, Definitions, define_asset_job, in_process_executor

from infra.errors import TributaryError
from infra.settings import Settings
from orchestration.assets import build_table_assets
from orchestration.checks import build_asset_checks
from orchestration.kafka_sensor import build_kafka_lag_sensor
from orchestration.maintenance import (
    build_compaction_sensor,
    build_maintenance_assets,
    maintenance_job,
    maintenance_schedule,
)
from orchestration.reprocess import build_full_refresh_job, build_reprocess_job
from orchestration.resources import SparkResource
from orchestration.run_log_sensor import build_run_log_sensor
from orchestration.schedules import build_pipeline_schedule
from orchestration.sensors import build_landing_sensor, build_run_failure_sensor
from orchestration.serving import SERVING_GROUP, build_serving_assets
from orchestration.sinks import SINKS_GROUP, build_sink_assets
from pipelines.datasets import default_registry

PIPELINE_JOB = "tributary_pipeline"
LAYER_GROUPS = ("bronze", "silver", "gold")


def build_definitions() -> Definitions:
    """Assets, the whole-pipeline job (in-process: one run, one JVM) and resources."""
    registry = default_registry()
    settings = Settings.from_env()
    pipeline_job = define_asset_job(
        PIPELINE_JOB,
        selection=AssetSelection.groups(*LAYER_GROUPS, SERVING_GROUP, SINKS_GROUP),
        executor_def=in_process_executor,
        description="Every table bronze → silver → gold, incrementally, in one process sharing one SparkSession, "
        "then the served tables synced into PostgreSQL and the sinks delivered.",
    )
    return Definitions(
        assets=build_table_assets(registry, settings)
        + build_maintenance_assets(registry)
        + build_serving_assets(registry)
        + build_sink_assets(registry),
        asset_checks=build_asset_checks(registry),
        jobs=[pipeline_job, maintenance_job, build_reprocess_job(registry), build_full_refresh_job(registry)],
        schedules=[maintenance_schedule, build_pipeline_schedule(pipeline_job, settings)],
        sensors=[
            build_compaction_sensor(registry),
            build_landing_sensor(registry, pipeline_job, settings),
            build_run_failure_sensor(settings),
            build_run_log_sensor(settings),
            *filter(None, [build_kafka_lag_sensor(registry, pipeline_job, settings)]),
        ],
        # Runs launched from the UI, backfills included, share one process and one SparkSession too.
        executor=in_process_executor,
        resources={"spark": SparkResource()},
    )


class DatasetProblems(Exception):
    """The datasets cannot be loaded: the message holds one line per problem (`tributary validate` prints them)."""


try:
    defs = build_definitions()
except TributaryError as exc:
    # Raised here, not from deep in the loading code, so Dagster shows the lines with a one-frame stack.
    raise DatasetProblems(str(exc)) from None
