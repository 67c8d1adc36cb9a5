"""Benchmark: what a no-op run costs as the landing folder grows from 20 files to 10,000."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from infra.settings import Settings
from infra.spark import get_spark
from pipelines.datasets import default_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.run.runner import run_table
from pipelines.spec.sources import FileSource
from pipelines.spec.tables import TableSpec


def _bronze(archive: bool) -> TableSpec:
    spec = default_registry().get("bronze.events")
    assert isinstance(spec.source, FileSource)
    return replace(spec, source=replace(spec.source, archive=archive))


def _noop_seconds(settings: Settings, archive: bool, repeats: int = 3) -> float:
    """Best wall seconds of a no-op run of bronze.events (nothing new: no query, no JVM work)."""
    spec = _bronze(archive)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        report = run_table(None, settings, spec)
        best = min(best, time.perf_counter() - started)
        if not report.skipped:
            raise RuntimeError("the no-op run of bronze.events started its query")
    return best


def bench_many_files(settings: Settings, few: int = 20, many: int = 10_000, rows_per_file: int = 5) -> dict[str, Any]:
    """Ingest `few` and `many` small files into fresh homes, then time a no-op run of each; the ratio is the cost
    of a big landing folder (listing, the stream's file log, the fingerprint ledger). `many_archived` ingests
    the same files with `archive=True`: they leave the landing folder once committed."""
    result: dict[str, Any] = {"few_files": few, "many_files": many}
    spark = None
    for label, files, archive in (("few", few, False), ("many", many, False), ("many_archived", many, True)):
        home = settings.home / label
        s = replace(Settings.from_env(home=home).with_home(home), catalog_name=f"{settings.catalog_name}{label}")
        generate(s.landing, rows=files * rows_per_file, files=files, seed=3)
        spark = get_spark(s)
        started = time.perf_counter()
        report = run_table(spark, s, _bronze(archive))
        result[f"{label}_first_run_seconds"] = round(time.perf_counter() - started, 2)
        result[f"{label}_first_run_stages"] = report.stages
        result[f"{label}_noop_seconds"] = round(_noop_seconds(s, archive), 3)
    for label in ("many", "many_archived"):
        result[f"ratio_noop_{label}_vs_few"] = round(result[f"{label}_noop_seconds"] / result["few_noop_seconds"], 2)
    result["targets"] = {
        "noop_with_10k_files_within_1.5x_of_20": result["ratio_noop_many_vs_few"] <= 1.5,
        "noop_with_10k_archived_files_within_1.5x_of_20": result["ratio_noop_many_archived_vs_few"] <= 1.5,
    }
    return result
