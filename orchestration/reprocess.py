"""Operator jobs launched from the Dagster UI: reprocess a date range of a streaming table, fully refresh a table.

The Spark work lives in `pipelines.ops.repair` and `pipelines.ops.full_refresh`. Both jobs run in-process (one
JVM), hold the table pool like every asset that writes tables, and report what they rewrote as materializations
of the affected assets.
"""

# No `from __future__ import annotations` here: Dagster reads the ops' config annotations at definition time.
from datetime import date

from dagster import (
    AssetMaterialization,
    Config,
    JobDefinition,
    OpExecutionContext,
    in_process_executor,
    job,
    op,
)
from pydantic import Field

from infra.errors import ConfigError, TributaryError
from orchestration.assets import RETRY_POLICY, TABLE_POOL, asset_key, no_retry_failure
from orchestration.metadata import range_metadata, report_metadata
from orchestration.resources import SparkResource
from pipelines.ops.full_refresh import check_confirmation, full_refresh
from pipelines.ops.repair import reprocess_downstream
from pipelines.spec.registry import Registry

REPROCESS_JOB = "tributary_reprocess"
FULL_REFRESH_JOB = "tributary_full_refresh"


class ReprocessConfig(Config):
    """Which table and which days (inclusive, UTC) to re-derive from the table's input."""

    table: str = Field(description="A bronze or silver table, e.g. silver.events.")
    start: str = Field(description="First day, YYYY-MM-DD (bronze: ingestion day; silver: event day).")
    end: str = Field(description="Last day, YYYY-MM-DD (inclusive).")


class FullRefreshConfig(Config):
    """The table to drop and rebuild, named twice."""

    table: str = Field(description="The table to rebuild from scratch, e.g. silver.events; its downstream tables too.")
    confirm: str = Field(description="Type the table name again: its data and checkpoint are deleted first.")


def _day(value: str, field: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"{field}={value!r} is not a date (expected YYYY-MM-DD)") from None


def build_reprocess_job(registry: Registry) -> JobDefinition:
    """A job that reprocesses a date range of one streaming table and carries it downstream (`pipelines.ops.repair`)."""

    @op(name="reprocess_range", pool=TABLE_POOL, retry_policy=RETRY_POLICY)
    def _reprocess(context: OpExecutionContext, config: ReprocessConfig, spark: SparkResource) -> None:
        try:
            start, end = _day(config.start, "start"), _day(config.end, "end")
            repair = reprocess_downstream(spark.session(), spark.settings(), registry, config.table, start, end)
        except TributaryError as exc:
            raise no_retry_failure(exc) from exc
        for line in repair.lines():
            context.log.info(line)
        for report in repair.reports:
            context.log_event(AssetMaterialization(asset_key=asset_key(report.table), metadata=range_metadata(report)))

    @job(
        name=REPROCESS_JOB,
        executor_def=in_process_executor,
        description="Re-derive a date range of a bronze or silver table from its input and replace it in one "
        "commit, then recompute the same days of every day-partitioned table downstream; the streaming checkpoint "
        "is left alone, so the next incremental run adds nothing twice.",
    )
    def _job():
        _reprocess()

    return _job


def build_full_refresh_job(registry: Registry) -> JobDefinition:
    """A job that drops one table, everything downstream and their checkpoints, and rebuilds them."""

    @op(name="full_refresh", pool=TABLE_POOL, retry_policy=RETRY_POLICY)
    def _refresh(context: OpExecutionContext, config: FullRefreshConfig, spark: SparkResource) -> None:
        try:
            check_confirmation(config.table, config.confirm)  # before the JVM starts
            reports = full_refresh(spark.session(), spark.settings(), registry, config.table, config.confirm)
        except TributaryError as exc:
            raise no_retry_failure(exc) from exc
        for report in reports:
            for table in report.tables:
                context.log_event(
                    AssetMaterialization(asset_key=asset_key(table), metadata=report_metadata(report, table))
                )
        context.log.info(f"rebuilt {', '.join(t for r in reports for t in r.tables)} from scratch")

    @job(
        name=FULL_REFRESH_JOB,
        executor_def=in_process_executor,
        description="DESTRUCTIVE: drop a table, every table downstream and their checkpoints, then rebuild them "
        "all; config `confirm` must repeat the table name.",
    )
    def _job():
        _refresh()

    return _job
