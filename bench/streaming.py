"""Benchmark of the stateful streaming specs: the stream-stream join and session windows on 1 M impressions.

The clickstream generator lands `rows` impressions (and about a quarter as many clicks) over a day, in time
order; they are fed to the pipeline in `runs` incremental runs. For `gold.ad_clicks` (impressions joined with
clicks within 5 minutes, watermarks on both sides) and `gold.user_sessions` (per-user session windows) the
section reports rows/s and the state each run leaves in the checkpoint (rows, bytes): bounded state stays about
the same from run to run instead of growing with the input.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from infra.settings import Settings
from infra.spark import get_spark
from pipelines.authoring.load import load_registry
from pipelines.datasets.clickstream.sample_data import LANDING_FOLDERS, ensure_landing_folders, generate_clickstream
from pipelines.run.runner import run_table
from pipelines.sources.report import RunReport

MEASURED = ("gold.ad_clicks", "gold.user_sessions")
FEEDERS = ("bronze.impressions", "bronze.clicks", "silver.products", "silver.impressions")


def _numbers(report: RunReport) -> dict[str, Any]:
    return {
        "seconds": report.seconds,
        "rows_in": report.rows_in,
        "rows_per_second": round(report.rows_in / report.seconds) if report.seconds else None,
        "processed_rows_per_second": report.processed_rows_per_second,
        "batches": report.batches,
        "rows_written": report.rows_written(),
        "state_rows": report.state_rows,
        "state_memory_bytes": report.state_memory_bytes,
        "rows_late": report.metrics.get("rows_late", 0),
    }


def _move_run(staging: dict[str, list[Path]], landing: Path, run: int, runs: int) -> None:
    """Move the run's share of each folder's staged files (in name, i.e. time, order) into the landing zone."""
    for folder, files in staging.items():
        for path in files[len(files) * run // runs : len(files) * (run + 1) // runs]:
            shutil.move(str(path), landing / folder / path.name)


def bench_streaming(settings: Settings, rows: int = 1_000_000, runs: int = 4) -> dict[str, Any]:
    """Rows/s and state size of the stream-stream join and the session windows, run by run."""
    result: dict[str, Any] = {"rows": rows, "runs": runs}
    staging = settings.home / "staging"
    t = time.perf_counter()
    report = generate_clickstream(staging, impressions=rows, files=runs * 4, seed=1, hours=24, users=50_000)
    result["generate_seconds"] = round(time.perf_counter() - t, 2)
    result["clicks"] = report.clicks
    ensure_landing_folders(settings.landing)

    staged = {folder: sorted((staging / folder).iterdir()) for folder in LANDING_FOLDERS}

    spark = get_spark(settings)
    registry = load_registry(["pipelines.datasets.clickstream"])
    per_run: dict[str, list[dict[str, Any]]] = {name: [] for name in MEASURED}
    feed_seconds = 0.0
    for run in range(runs):
        _move_run(staged, settings.landing, run, runs)
        for name in FEEDERS:
            feed_seconds += run_table(spark, settings, registry.get(name)).seconds
        for name in MEASURED:
            per_run[name].append(_numbers(run_table(spark, settings, registry.get(name))))
    result["feed_seconds"] = round(feed_seconds, 2)
    for name, numbers in per_run.items():
        seconds = sum(n["seconds"] for n in numbers)
        rows_in = sum(n["rows_in"] for n in numbers)
        result[name] = {
            "seconds": round(seconds, 2),
            "rows_in": rows_in,
            "rows_per_second": round(rows_in / seconds) if seconds else None,
            "rows_written": sum(n["rows_written"] for n in numbers),
            "state_rows_by_run": [n["state_rows"] for n in numbers],
            "state_memory_bytes_by_run": [n["state_memory_bytes"] for n in numbers],
            "runs": numbers,
        }
    return result
