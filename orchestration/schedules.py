"""The schedule of the whole pipeline (cron from `TRIBUTARY_PIPELINE_CRON`, default hourly)."""

from __future__ import annotations

from dagster import DagsterInvalidDefinitionError, DefaultScheduleStatus, ScheduleDefinition

from infra.errors import ConfigError
from infra.settings import Settings

PIPELINE_SCHEDULE = "tributary_pipeline_schedule"


def build_pipeline_schedule(job, settings: Settings) -> ScheduleDefinition:
    """Run `job` (the in-process pipeline job) on `settings.pipeline_cron`, in UTC, running by default.

    The landing sensor already starts a run when files arrive; the schedule is the safety net that also picks up
    files the sensor could not see (another landing layout, a sensor turned off) and keeps streams moving.
    """
    try:
        return ScheduleDefinition(
            name=PIPELINE_SCHEDULE,
            job=job,
            cron_schedule=settings.pipeline_cron,
            execution_timezone="UTC",
            default_status=DefaultScheduleStatus.RUNNING,
            tags={"tributary/trigger": PIPELINE_SCHEDULE},
            description=f"The whole pipeline, incrementally, on cron {settings.pipeline_cron!r} (UTC).",
        )
    except DagsterInvalidDefinitionError as exc:
        raise ConfigError(
            f"TRIBUTARY_PIPELINE_CRON={settings.pipeline_cron!r} is not a valid cron expression "
            "(five fields, e.g. '0 * * * *' for hourly)"
        ) from exc
