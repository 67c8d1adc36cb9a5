"""Iceberg and Delta side by side: the same landed events through bronze, silver and gold in each format.

Each format runs on its own home with a copy of the same files, in one process (one JVM), twice, in the order
iceberg, delta, delta, iceberg, so that neither format always runs first on a cold JVM; the faster run of each is
reported. Then a second, smaller drop shows what an incremental run costs in each format, and every demo table's
first load on a tiny drop (`TINY_ROWS` events) what a new user meets first: the fixed cost of each table's run
(stream starts, planning, commits), in the same alternated order.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from infra.settings import Settings
from infra.spark import get_spark
from pipelines.datasets import default_registry, demo_registry, land_demo
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.run.runner import run_table

LAYERS = {"bronze": "bronze.events", "silver": "silver.events", "gold": "gold.daily_revenue"}
WINDOWS = "gold.event_counts_5m"
# Events of the tiny drop every demo table's first load reads (and a fifth of it as clickstream impressions).
TINY_ROWS = 2_000


def _home(settings: Settings, name: str, table_format: str, landing: Path) -> Settings:
    home = settings.home.parent / f"{settings.home.name}-{name}"
    shutil.copytree(landing, home / "landing")
    base = Settings.from_env(home=home).with_home(home)
    return replace(base, catalog_name=f"{settings.catalog_name}{name.replace('-', '')}", table_format=table_format)


def _chain(settings: Settings) -> dict[str, float]:
    spark = get_spark(settings)
    registry = default_registry()
    out = {}
    for layer, table in (*LAYERS.items(), ("gold_windows", WINDOWS)):
        out[layer] = run_table(spark, settings, registry.get(table)).seconds
    return out


def bench_formats(settings: Settings, rows: int = 1_000_000, files: int = 20, more: int = 50_000) -> dict[str, Any]:
    """Seconds per layer on `rows` events in `files` files, then on `more` new events, in each format."""
    generate(settings.landing, rows=rows, files=files, seed=1)
    warmup = settings.home / "warmup-landing"
    generate(warmup, rows=2_000, files=2, seed=2)
    for table_format in ("iceberg", "delta"):  # class loading and JIT for both code paths
        _chain(_home(settings, f"warm-{table_format}", table_format, warmup))

    runs: dict[str, list[dict[str, float]]] = {"iceberg": [], "delta": []}
    homes: dict[str, Settings] = {}
    for attempt, table_format in enumerate(("iceberg", "delta", "delta", "iceberg")):
        home = _home(settings, f"{table_format}-{attempt}", table_format, settings.landing)
        runs[table_format].append(_chain(home))
        homes[table_format] = home
    result: dict[str, Any] = {"rows": rows, "files": files}
    for table_format, measured in runs.items():
        result[table_format] = {layer: min(m[layer] for m in measured) for layer in measured[0]}

    incremental: dict[str, dict[str, float]] = {}
    for table_format, home in homes.items():
        generate(home.landing, rows=more, files=1, seed=3)
        incremental[table_format] = _chain(home)
    result["incremental"] = {"rows": more, **incremental}

    result["tiny_first_load"] = tiny_first_loads(settings)
    result["ratio_delta_vs_iceberg"] = {
        layer: round(result["delta"][layer] / result["iceberg"][layer], 2) for layer in result["iceberg"]
    }
    result["targets"] = {
        f"delta_{layer}_within_1.5x_iceberg": result["ratio_delta_vs_iceberg"][layer] <= 1.5 for layer in LAYERS
    }
    return result


def tiny_first_loads(settings: Settings) -> dict[str, Any]:
    """Seconds of every demo table's first load on a tiny drop, per format: the faster of two alternated runs in
    total, with that run's seconds per table."""
    landing = settings.home / "tiny-landing"
    land_demo(landing, rows=TINY_ROWS, files=3, seed=1)
    registry = demo_registry()
    runs: dict[str, list[dict[str, float]]] = {"iceberg": [], "delta": []}
    for attempt, table_format in enumerate(("iceberg", "delta", "delta", "iceberg")):
        home = _home(settings, f"tiny-{table_format}-{attempt}", table_format, landing)
        spark = get_spark(home)
        runs[table_format].append({spec.name: run_table(spark, home, spec).seconds for spec in registry})
    out: dict[str, Any] = {"rows": TINY_ROWS, "tables": len(registry)}
    for table_format, measured in runs.items():
        fastest = min(measured, key=lambda m: sum(m.values()))
        out[table_format] = {"seconds": round(sum(fastest.values()), 2), "tables": fastest}
    out["ratio_delta_vs_iceberg"] = round(out["delta"]["seconds"] / out["iceberg"]["seconds"], 2)
    return out
