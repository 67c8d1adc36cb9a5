"""The `tributary_run_log` sensor: commits the rows Dagster runs left pending to `ops.run_log` (no JVM, no run)."""

from __future__ import annotations

from dagster import DefaultSensorStatus, SensorDefinition, SensorEvaluationContext, SkipReason, sensor

from infra.errors import first_line
from infra.settings import Settings
from orchestration.sensors import tick_spacing
from pipelines.run.run_log import RUN_LOG, fold

RUN_LOG_SENSOR = "tributary_run_log"


def build_run_log_sensor(settings: Settings) -> SensorDefinition:
    """A sensor that folds pending run-log rows into `ops.run_log` at every tick; it never launches a run."""

    @sensor(
        name=RUN_LOG_SENSOR,
        minimum_interval_seconds=tick_spacing(settings.sensor_interval_seconds),
        default_status=DefaultSensorStatus.RUNNING,
        description=f"Commits each table run's row to {RUN_LOG} (written by pyiceberg or delta-rs, no Spark).",
    )
    def _fold(context: SensorEvaluationContext) -> SkipReason:
        try:
            appended = fold(settings)
        except Exception as exc:  # the rows stay pending; the next tick tries again
            return SkipReason(f"{RUN_LOG} not written yet, rows kept pending: {first_line(exc)}")
        return SkipReason(f"{appended} run rows committed to {RUN_LOG}")

    return _fold
