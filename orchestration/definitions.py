"""The Dagster `Definitions` of the platform, built from the table registry."""

from __future__ import annotations

from dagster import AssetSelection, Definitions, define_asset_job, in_process_executor

from orchestration.assets import build_table_assets
from orchestration.resources import SparkResource
from pipelines.datasets import default_registry

PIPELINE_JOB = "tributary_pipeline"
LAYER_GROUPS = ("bronze", "silver", "gold")


def build_definitions() -> Definitions:
    """Assets, the whole-pipeline job (in-process: one run, one JVM) and resources."""
    registry = default_registry()
    pipeline_job = define_asset_job(
        PIPELINE_JOB,
        selection=AssetSelection.groups(*LAYER_GROUPS),
        executor_def=in_process_executor,
        description="Every table bronze → silver → gold, incrementally, in one process sharing one SparkSession.",
    )
    return Definitions(
        assets=build_table_assets(registry),
        jobs=[pipeline_job],
        resources={"spark": SparkResource()},
    )


defs = build_definitions()
