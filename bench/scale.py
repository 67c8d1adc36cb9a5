"""Benchmark: how the time of bronze → silver → gold grows from 1 M to 4 M events (the same file size)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from infra.settings import Settings
from infra.spark import get_spark
from pipelines.datasets import default_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.run.runner import run_table

CHAIN = ("bronze.events", "silver.events", "gold.daily_revenue")
EVENTS_PER_FILE = 50_000


def bench_scale(settings: Settings, sizes: tuple[int, ...] = (1_000_000, 4_000_000)) -> dict[str, Any]:
    """Run the e-commerce chain on each size in a fresh home; seconds per table and the growth ratio."""
    registry = default_registry()
    result: dict[str, Any] = {}
    for rows in sizes:
        label = f"{rows // 1_000_000}m"
        home = settings.home / label
        s = replace(Settings.from_env(home=home).with_home(home), catalog_name=f"{settings.catalog_name}{label}")
        generate(s.landing, rows=rows, files=rows // EVENTS_PER_FILE, seed=1)
        spark = get_spark(s)
        tables = {}
        for name in CHAIN:
            started = time.perf_counter()
            report = run_table(spark, s, registry.get(name))
            tables[name] = {"seconds": round(time.perf_counter() - started, 2), "rows_in": report.rows_in}
        result[label] = {"tables": tables, "chain_seconds": round(sum(t["seconds"] for t in tables.values()), 2)}
    small, large = (f"{n // 1_000_000}m" for n in (sizes[0], sizes[-1]))
    growth = result[large]["chain_seconds"] / result[small]["chain_seconds"]
    result[f"growth_{small}_to_{large}"] = round(growth, 2)
    # Linear would be sizes[-1] / sizes[0]; the target allows 10 % above it (4.4x for 1 M to 4 M).
    result["targets"] = {f"growth_{small}_to_{large}_within_1.1x_linear": growth <= 1.1 * sizes[-1] / sizes[0]}
    return result
