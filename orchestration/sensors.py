"""Sensors: the landing sensor that starts the pipeline when complete new files arrive, and the failure alert.

The landing sensor only lists folders (os.scandir): no SparkSession, no JVM, cheap enough to run every few seconds.
It launches the in-process pipeline job for the tables that read the datasets with new files and everything
downstream of them, so one run carries new files bronze → silver → gold in one JVM.
"""

from __future__ import annotations

import hashlib
import json
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dagster import (
    AssetKey,
    DefaultSensorStatus,
    RunFailureSensorContext,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    run_failure_sensor,
    sensor,
)

from infra.paths import canonical
from infra.settings import Settings
from orchestration.assets import TRIGGER_TAG, asset_key
from orchestration.resources import SparkResource
from pipelines.io.file_source_log import committed_files
from pipelines.io.landing import landed_paths, landing_folder
from pipelines.sources.base import flow_checkpoint
from pipelines.spec.registry import Registry

LANDING_SENSOR = "tributary_landing_sensor"
FAILURE_SENSOR = "tributary_run_failure_alert"
ERROR_TAG = "tributary/error"
FAILED_STEP_TAG = "tributary/failed_step"
# How long names stay in the cursor after they arrive. A file counts as arrived when it was last written or renamed
# (max of mtime and ctime); files older than the window are never new again, so the cursor stays small.
MIN_MEMORY_SECONDS = 600


def tick_spacing(interval: int) -> int:
    """The `minimum_interval_seconds` that makes a sensor tick every `interval` seconds.

    Dagster's sensor daemon wakes every 5 s and runs a sensor whose last tick started at least its minimum
    interval ago. Ticks start a little after each wake-up, so at the wake-up `interval` seconds later slightly
    less than `interval` has passed: asking for exactly `interval` skips that wake-up (10 s became 15 s here).
    """
    return max(1, interval - 1)


def scan_landing(settings: Settings, registry: Registry) -> dict[str, float]:
    """Every landed file in the registry's landing folders, as `dataset/name` → arrival time (epoch seconds).

    Landed files are the files the pipeline's stream reads (`pipelines.io.landing`), so every file that triggers
    a run is read by it and every file it reads triggers one.
    """
    sources = {
        folder: flow.source
        for spec in registry
        for flow in spec.all_flows()
        if (folder := flow.source.landing_folder_name())
    }
    found: dict[str, float] = {}
    for dataset, source in sorted(sources.items()):
        for path in landed_paths(landing_folder(settings, source)):
            try:
                stat = path.stat()
            except FileNotFoundError:  # removed or renamed between listing and stat
                continue
            found[f"{dataset}/{path.name}"] = max(stat.st_mtime, stat.st_ctime)
    return found


def unread(settings: Settings, registry: Registry, names: list[str]) -> list[str]:
    """The `dataset/name` files among `names` that some flow reading their folder has not committed yet (read from
    the checkpoints, no JVM): files a run outside Dagster (`tributary demo`, `tributary run`) already read start no
    run when Dagster first sees them."""
    readers: dict[str, list[tuple[Path, Path]]] = {}
    for spec in registry:
        for flow in spec.all_flows():
            if folder := flow.source.landing_folder_name():
                where = landing_folder(settings, flow.source)
                readers.setdefault(folder, []).append((where, flow_checkpoint(settings, spec.name, flow.name)))
    committed: dict[Path, set[str]] = {}
    left = []
    for name in names:
        dataset, file = name.split("/", 1)
        for where, checkpoint in readers.get(dataset, []):
            if checkpoint not in committed:
                committed[checkpoint] = committed_files(checkpoint)
            if canonical(str(where / file)) not in committed[checkpoint]:
                left.append(name)
                break
    return left


@dataclass
class LandingCursor:
    """What the landing sensor has seen: files that arrived before `floor` are old; `recent` holds newer names."""

    floor: float = 0.0
    recent: dict[str, float] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str | None) -> LandingCursor:
        """The cursor stored by the previous tick (empty on the first tick)."""
        if not text:
            return cls()
        data = json.loads(text)
        return cls(float(data["floor"]), {str(k): float(v) for k, v in data["recent"].items()})

    def dump(self) -> str:
        """The cursor as Dagster stores it."""
        return json.dumps({"floor": self.floor, "recent": self.recent}, sort_keys=True)


def new_files(
    cursor: LandingCursor, scanned: Mapping[str, float], now: float, memory_seconds: float
) -> tuple[list[str], LandingCursor]:
    """The files in `scanned` not seen before, and the cursor to store.

    A name already in the cursor is never new again, whatever happens to the file, so dropping the same files a
    second time triggers nothing. Names are forgotten `memory_seconds` after they arrived; by then they are below
    the floor and stay old.
    """
    new = sorted(name for name, arrived in scanned.items() if arrived > cursor.floor and name not in cursor.recent)
    floor = max(cursor.floor, now - memory_seconds)
    recent = {name: arrived for name, arrived in cursor.recent.items() if arrived > floor}
    recent.update({name: scanned[name] for name in new if scanned[name] > floor})
    return new, LandingCursor(floor, recent)


def affected_assets(registry: Registry, datasets: set[str]) -> list[AssetKey]:
    """Every asset fed by the landing datasets, directly or downstream (all outputs of each spec)."""
    roots = [s.name for s in registry if any(f.source.landing_folder_name() in datasets for f in s.all_flows())]
    return [asset_key(out.name) for spec in registry.downstream_closure(roots) for out in spec.outputs()]


def build_landing_sensor(registry: Registry, job, settings: Settings) -> SensorDefinition:
    """A running-by-default sensor that launches `job` (the whole pipeline) when complete new files land."""
    interval = settings.sensor_interval_seconds
    memory = max(MIN_MEMORY_SECONDS, 10 * interval)

    @sensor(
        name=LANDING_SENSOR,
        job=job,
        minimum_interval_seconds=tick_spacing(interval),
        default_status=DefaultSensorStatus.RUNNING,
        description=(
            "Lists the landing folders every few seconds (no JVM) and launches the pipeline job when new files "
            "that the pipeline reads arrive (names not starting with '.' or '_'); the same files never trigger twice."
        ),
    )
    def _landing(context: SensorEvaluationContext, spark: SparkResource) -> RunRequest | SkipReason:
        scanned = scan_landing(spark.settings(), registry)
        new, cursor = new_files(LandingCursor.parse(context.cursor), scanned, time.time(), memory)
        context.update_cursor(cursor.dump())
        new = unread(spark.settings(), registry, new) if new else new
        if not new:
            return SkipReason(f"no new complete files among {len(scanned)} landed files")
        context.log.info(f"{len(new)} new file(s): {', '.join(new[:10])}{' …' if len(new) > 10 else ''}")
        return RunRequest(
            run_key=hashlib.sha256("\n".join(new).encode()).hexdigest(),
            asset_selection=affected_assets(registry, {name.split("/", 1)[0] for name in new}),
            tags={TRIGGER_TAG: LANDING_SENSOR, "tributary/new_files": str(len(new))},
        )

    return _landing


def failure_summary(context: RunFailureSensorContext) -> tuple[str, str | None]:
    """The most specific error of a failed run (the failed step's message, else the run's) and the step's key."""
    for event in reversed(context.get_step_failure_events()):
        data = event.event_specific_data
        user = getattr(data, "user_failure_data", None)
        if user is not None and user.description:
            return user.description, event.step_key
        error = getattr(data, "error", None)
        if error is not None:
            return error.message.strip().splitlines()[0], event.step_key
    return (context.failure_event.message or "the run failed"), None


def post_alert(url: str, payload: dict, timeout: float = 10.0) -> None:
    """POST the alert as JSON to the webhook (Slack-compatible `text` field included)."""
    body = json.dumps(payload).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=timeout):
        pass


def build_run_failure_sensor(settings: Settings) -> SensorDefinition:
    """A sensor that writes a failed run's error into its tags (visible in the runs list) and posts it to a webhook."""

    @run_failure_sensor(
        name=FAILURE_SENSOR,
        minimum_interval_seconds=tick_spacing(settings.sensor_interval_seconds),
        default_status=DefaultSensorStatus.RUNNING,
        description="Tags every failed run with its error (tributary/error) and posts it to TRIBUTARY_ALERT_WEBHOOK.",
    )
    def _alert(context: RunFailureSensorContext) -> None:
        run = context.dagster_run
        message, step = failure_summary(context)
        tags = {ERROR_TAG: message[:1000]}
        if step:
            tags[FAILED_STEP_TAG] = step
        context.instance.add_run_tags(run.run_id, tags)
        webhook = settings.alert_webhook
        if webhook:
            payload = {"run_id": run.run_id, "job": run.job_name, "step": step, "error": message}
            payload["text"] = f"Tributary run {run.run_id} ({run.job_name}) failed: {message}"
            try:
                post_alert(webhook, payload)
            except OSError as exc:
                context.log.warning(f"could not post the failure of run {run.run_id} to TRIBUTARY_ALERT_WEBHOOK: {exc}")

    return _alert
