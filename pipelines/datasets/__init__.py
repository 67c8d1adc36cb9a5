"""Datasets known to the platform: the modules named in `TRIBUTARY_DATASETS` (a team's own packages), or, when
that setting is empty, a package each under this folder, found automatically (the demo datasets), each with its
`.sql` tables. A team's project is its own: with the setting, the demo's tables do not exist."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from infra.kafka import KafkaSettings
from pipelines.authoring.discover import packages_under
from pipelines.authoring.load import load_registry
from pipelines.spec.registry import Registry


def dataset_modules() -> list[str]:
    """The modules named by the `TRIBUTARY_DATASETS` setting, or, without it, the packages under this folder."""
    from infra.settings import dataset_modules_setting

    return list(dataset_modules_setting()) or packages_under(__name__)


def default_registry() -> Registry:
    """The registry of every table of every dataset, upstream tables first."""
    return load_registry(dataset_modules())


def demo_registry() -> Registry:
    """The registry of the demo datasets (the packages under this folder), whatever `TRIBUTARY_DATASETS` says."""
    return load_registry(packages_under(__name__))


def land_events(landing: Path, rows: int, files: int, seed: int, days: int | None = None, progress: bool = True) -> str:
    """Land the e-commerce demo's event files (`tributary generate`); returns the line to print."""
    from pipelines.datasets.ecommerce.sample_data import generate

    options = {"days": days} if days is not None else {}
    report = generate(landing, rows=rows, files=files, seed=seed, progress=progress, **options)
    return (
        f"landed {report.lines} lines in {len(report.files)} files under {landing / 'events'} "
        f"({report.duplicates} duplicates, {report.late} late, {report.malformed} malformed, "
        f"{report.missing_ids} without id)"
    )


def land_demo(landing: Path, rows: int, files: int, seed: int) -> list[str]:
    """Land both demo datasets once (a landing folder that already has files is left alone): lines to print.

    The events cover the three days before today (UTC), so the freshness check of `silver.events` passes on
    the day the demo lands them. The clickstream gets a fifth of `rows` as impressions, in at most four files per
    folder.
    """
    from pipelines.datasets.clickstream.sample_data import LANDING_FOLDERS, generate_clickstream
    from pipelines.datasets.ecommerce.sample_data import generate

    lines = []
    events = landing / "events"
    if not events.is_dir() or not any(events.glob("*.json")):
        today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        report = generate(landing, rows=rows, files=files, seed=seed, start=today - timedelta(days=3), progress=True)
        lines.append(f"generated {report.lines} events in {len(report.files)} files under {events}")
    else:
        lines.append(f"landing zone {events} already has files: not generating more")
    folders = [landing / name for name in LANDING_FOLDERS]
    if not any(p.is_dir() and any(p.iterdir()) for p in folders):
        clicks = generate_clickstream(landing, impressions=max(rows // 5, 100), files=min(files, 4), seed=seed)
        lines.append(
            f"generated the clickstream demo: {clicks.impressions} impressions, {clicks.clicks} clicks, "
            f"{clicks.products} products, {clicks.changes} customer changes under {landing}"
        )
    return lines


def feed_demo_topic(landing: Path, kafka: KafkaSettings) -> str:
    """Send the landed demo events to the `events` topic once (a topic that exists is left alone): the line to print."""
    from pipelines.io.kafka_produce import produce_lines, topic_exists

    if topic_exists(kafka, "events"):
        return f"Kafka topic events already exists on {kafka.bootstrap}: not producing more"
    files = sorted(p for p in (landing / "events").iterdir() if p.is_file())
    sent = produce_lines(kafka, "events", files)
    return f"produced {sent} events from {len(files)} files into Kafka topic events (3 partitions) on {kafka.bootstrap}"


def registry_with_events_from(source: str) -> Registry:
    """The registry with the e-commerce `bronze.events` reading `source` ("files" or "kafka", as
    `TRIBUTARY_EVENTS_SOURCE` says), whatever the environment says; the environment's choice is restored after."""
    import importlib
    import os

    import pipelines.datasets.ecommerce.tables as tables

    before = os.environ.get("TRIBUTARY_EVENTS_SOURCE")
    os.environ["TRIBUTARY_EVENTS_SOURCE"] = source
    try:
        importlib.reload(tables)
        return default_registry()
    finally:
        if before is None:
            os.environ.pop("TRIBUTARY_EVENTS_SOURCE")
        else:
            os.environ["TRIBUTARY_EVENTS_SOURCE"] = before
        importlib.reload(tables)
