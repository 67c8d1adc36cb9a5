"""Running the pipeline job through Dagster from Python (used by `tributary demo` and tests)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dagster import AssetCheckSeverity, DagsterInstance

from infra.deploy import instance_yaml, is_ours
from infra.errors import PipelineError
from infra.settings import Settings
from pipelines.run.run_log import fold_or_leave


def dagster_home(settings: Settings) -> Path:
    """`$DAGSTER_HOME`, or `<home>/dagster`, with the profile's `dagster.yaml` installed (`infra.deploy`)."""
    source = instance_yaml(settings.deployment)
    home = Path(os.environ.get("DAGSTER_HOME") or settings.home / "dagster")
    home.mkdir(parents=True, exist_ok=True)
    target = home / "dagster.yaml"
    # Refresh our own instance config (it gains settings over time); never touch a yaml someone wrote by hand.
    if not target.exists() or is_ours(target.read_text()):
        target.write_text(source.read_text())
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def materialize_pipeline(settings: Settings) -> dict[str, dict[str, Any]]:
    """Execute the pipeline job in-process against the local Dagster instance.

    Returns each materialized table's metadata numbers, as recorded by Dagster.
    """
    from orchestration.definitions import PIPELINE_JOB, build_definitions

    os.environ["TRIBUTARY_HOME"] = str(settings.home)
    dagster_home(settings)
    job = build_definitions().resolve_job_def(PIPELINE_JOB)
    with DagsterInstance.get() as instance:
        result = job.execute_in_process(
            instance=instance,
            raise_on_error=False,
            run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
        )
    fold_or_leave(settings)  # the runs' rows, failed ones included, are in ops.run_log when the demo ends
    if not result.success:
        errors = [e.message for e in result.all_events if e.is_failure and e.message]
        # A blocking check stops the run with a generic step failure; its own description names the fix.
        blocked = [
            f"{'.'.join(e.asset_key.path)} {e.check_name}: {e.description}"
            for e in result.get_asset_check_evaluations()
            if not e.passed and e.severity == AssetCheckSeverity.ERROR and e.description
        ]
        detail = "; ".join(blocked) or (errors[-1] if errors else "see the Dagster UI")
        raise PipelineError(f"Dagster run {result.run_id} failed: {detail}")
    numbers: dict[str, dict[str, Any]] = {}
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization
        numbers[".".join(mat.asset_key.path)] = {k: v.value for k, v in mat.metadata.items()}
    return numbers
