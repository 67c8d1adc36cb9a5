"""Run registry tables in dependency order."""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import SparkSession

from infra.settings import Settings
from pipelines.registry import Registry
from pipelines.runner import RunReport, run_table


def run_pipeline(
    spark: SparkSession, settings: Settings, registry: Registry, tables: Iterable[str] | None = None
) -> list[RunReport]:
    """Run the named tables (default: all) upstream first; stop at the first failure."""
    wanted = set(tables) if tables is not None else None
    if wanted is not None:
        for name in wanted:
            registry.get(name)  # unknown names fail before anything runs
    return [run_table(spark, settings, spec) for spec in registry if wanted is None or spec.name in wanted]
