"""Run every check of a table outside Dagster (the CLI and benchmarks); Dagster runs the same functions as checks."""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import SparkSession

from infra.settings import Settings
from pipelines.spec.expectations import validate_suite
from pipelines.spec.registry import Registry
from pipelines.spec.tables import TableSpec
from quality.gx_runner import validate_table
from quality.reconcile import pipelines_of, reconcile_pipeline, reconcile_totals, totals_expectations
from quality.report import write_report
from quality.results import CheckResult, save_result


def validate_registry(registry: Registry) -> None:
    """Raise ConfigError naming the table and expectation when a suite refers to unknown columns or tables."""
    known = {out.name for spec in registry for out in spec.outputs()}
    for spec in registry:
        validate_suite(spec.name, spec.output.schema.fieldNames(), spec.keys, spec.expectations, known)


def check_table(
    spark: SparkSession, settings: Settings, registry: Registry, spec: TableSpec, deep: bool = False
) -> list[CheckResult]:
    """The table's expectation checks and reconciliations, each persisted as the latest result (`deep`: reading
    every row, not what the batches recorded in their commits)."""
    results = list(validate_table(spark, settings, spec, deep=deep).values())
    pipelines = [p for p in pipelines_of(registry) if p.silver.name == spec.name]
    results += [reconcile_pipeline(spark, settings, p, deep) for p in pipelines]
    if totals_expectations(spec):
        results.append(reconcile_totals(spark, settings, spec))
    for result in results:
        save_result(settings, result)
    return results


def check_tables(
    spark: SparkSession,
    settings: Settings,
    registry: Registry,
    tables: Iterable[str] | None = None,
    deep: bool = False,
) -> list[CheckResult]:
    """Check the named tables (default: all, upstream first) and rewrite the quality report."""
    validate_registry(registry)
    wanted = {registry.get(name).name for name in tables} if tables else None  # unknown names fail first
    specs = [spec for spec in registry if wanted is None or spec.name in wanted]
    results = [r for spec in specs for r in check_table(spark, settings, registry, spec, deep)]
    write_report(settings)
    return results
