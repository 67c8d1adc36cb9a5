"""Benchmark: what the quality checks add to the silver stage, on 1 M generated events."""

from __future__ import annotations

import time
from typing import Any

from pyspark.sql import SparkSession

from infra.settings import Settings
from infra.spark import get_spark
from pipelines.authoring.load import load_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io.formats import table_format
from pipelines.run.runner import run_table
from pipelines.spec.registry import Registry
from quality.gx_runner import CHECK_NAMES, validate_table
from quality.reconcile import CHECK_NAME, pipelines_of, reconcile_pipeline
from quality.results import results_dir, save_result

# Checks and reconciliation add at most this share of the silver run (warm).
TARGET_RATIO = 0.10


def bench_quality(settings: Settings, rows: int = 1_000_000, files: int = 20) -> dict[str, Any]:
    """Seconds of the silver run vs its GX suite and the pipeline reconciliation, and their ratio to the stage.

    `gx_import_seconds` and `gx_first_use_seconds` are paid once per process (by the first check of a Dagster run,
    whatever its table), so they are reported apart; `gx_suite_seconds` is the silver suite (blocking and warning
    expectations on the whole table) and `checks_seconds` adds the pipeline reconciliation.
    """
    registry = load_registry(["pipelines.datasets.ecommerce"])
    bronze, silver = registry.get("bronze.events"), registry.get("silver.events")
    result: dict[str, Any] = {"rows": rows, "files": files}
    generate(settings.landing, rows=rows, files=files, seed=1)
    spark = get_spark(settings)
    spark.range(100_000).selectExpr("sum(id)").collect()  # warm the JVM so the silver run pays no first-job cost
    result["bronze_seconds"] = run_table(spark, settings, bronze).seconds
    report = run_table(spark, settings, silver)
    result["silver_seconds"] = report.seconds
    result["silver_rows_written"] = report.rows_written()

    result.update(silver_checks(spark, settings, registry, silver.name, report.seconds))
    # An increment of 0.1 % of the rows: the reconciliation counts what it appended on top of the last count.
    generate(settings.landing, rows=max(rows // 1000, 100), files=1, seed=2)
    run_table(spark, settings, bronze)
    increment = run_table(spark, settings, silver)
    result["increment"] = increment_checks(spark, settings, registry, silver.name, increment.seconds)
    result["targets"] = {
        "gx_suite_within_10pct_of_silver": result["ratio_gx_suite_vs_silver"] <= TARGET_RATIO,
        "checks_within_10pct_of_silver": result["ratio_checks_vs_silver"] <= TARGET_RATIO,
    }
    return result


def silver_checks(
    spark: SparkSession, settings: Settings, registry: Registry, silver_name: str, silver_seconds: float
) -> dict[str, Any]:
    """Seconds of a silver table's GX suite and its pipeline's reconciliation, warm, and their ratios to the
    silver run's `silver_seconds`.

    `gx_import_seconds` and `gx_first_use_seconds` are paid once per process (by the first check of a Dagster run,
    whatever its table), so they are reported apart and measured first.
    """
    silver = registry.get(silver_name)
    out: dict[str, Any] = {}
    started = time.perf_counter()
    import great_expectations  # noqa: F401  (timed: the checks import it lazily)

    out["gx_import_seconds"] = round(time.perf_counter() - started, 2)
    # GX's first validation and Spark's code generation for the metric queries, on 1,000 rows so that it is not
    # attributed to the data size.
    started = time.perf_counter()
    sample = spark.table(table_format(settings).qualified(silver.name)).limit(1000).cache()
    validate_table(spark, settings, silver, df=sample)
    sample.unpersist()
    out["gx_first_use_seconds"] = round(time.perf_counter() - started, 2)
    started = time.perf_counter()
    suite = validate_table(spark, settings, silver)
    out["gx_suite_seconds"] = round(time.perf_counter() - started, 2)
    for result in suite.values():
        save_result(settings, result)  # as a Dagster check does: the next validation starts from it
    out["gx_expectations"] = sum(len(r.outcomes) for r in suite.values())
    out["gx_suite_failed"] = sorted(o.name for r in suite.values() for o in r.failed)
    pipeline = next(p for p in pipelines_of(registry) if p.silver.name == silver.name)
    started = time.perf_counter()
    reconciliation = reconcile_pipeline(spark, settings, pipeline)
    out["reconciliation_seconds"] = round(time.perf_counter() - started, 2)
    out["reconciliation_read_from_commits"] = any("counted from the commits" in n for n in reconciliation.notes)
    out["reconciliation_passed"] = reconciliation.passed
    # The same checks reading every row (`tributary quality check --deep`), for comparison.
    started = time.perf_counter()
    out["reconciliation_deep_passed"] = reconcile_pipeline(spark, settings, pipeline, deep=True).passed
    out["reconciliation_deep_seconds"] = round(time.perf_counter() - started, 2)
    started = time.perf_counter()
    validate_table(spark, settings, silver, deep=True)
    out["gx_suite_deep_seconds"] = round(time.perf_counter() - started, 2)
    save_result(settings, reconciliation)  # as a Dagster check does: the next count starts from it
    started = time.perf_counter()
    validate_table(spark, settings, silver)
    out["gx_suite_second_run_seconds"] = round(time.perf_counter() - started, 2)
    checks = out["gx_suite_seconds"] + out["reconciliation_seconds"]
    once = out["gx_import_seconds"] + out["gx_first_use_seconds"]
    out["checks_seconds"] = round(checks, 2)
    out["ratio_gx_suite_vs_silver"] = round(out["gx_suite_seconds"] / silver_seconds, 3)
    out["ratio_checks_vs_silver"] = round(checks / silver_seconds, 3)
    out["ratio_checks_with_once_per_process_vs_silver"] = round((checks + once) / silver_seconds, 3)
    return out


def increment_checks(
    spark: SparkSession, settings: Settings, registry: Registry, silver_name: str, silver_seconds: float
) -> dict[str, Any]:
    """Seconds of a silver table's checks after an increment, each beside the same check from scratch reading every
    row (`deep`), and their ratio to the increment's silver run: the pipeline reconciliation (read from what the
    batches recorded in their commits, `quality.pipeline_ledger`) and the GX suite (row expectations the commits
    prove, `quality.gx_increment`)."""
    pipeline = next(p for p in pipelines_of(registry) if p.silver.name == silver_name)
    silver = registry.get(silver_name)
    out: dict[str, Any] = {"silver_seconds": silver_seconds}

    def timed(check):  # (seconds, result) of one run of `check`
        started = time.perf_counter()
        result = check()
        return round(time.perf_counter() - started, 2), result

    seconds, since = timed(lambda: reconcile_pipeline(spark, settings, pipeline))
    (results_dir(settings) / f"{silver_name}.{CHECK_NAME}.json").unlink()  # no earlier result to start from
    out["reconciliation_from_scratch_seconds"], full = timed(
        lambda: reconcile_pipeline(spark, settings, pipeline, deep=True)
    )
    save_result(settings, since)
    out["reconciliation_seconds"] = seconds
    out["read_from_commits"] = any("counted from the commits" in note for note in since.notes)
    # The last outcome says how silver's keys were judged (counted, or by the commits): its numbers are compared.
    out["passed"] = since.passed and [o.observed for o in since.outcomes[:3]] == [o.observed for o in full.outcomes[:3]]

    gx_seconds, suite = timed(lambda: validate_table(spark, settings, silver))
    for check in CHECK_NAMES.values():
        (results_dir(settings) / f"{silver_name}.{check}.json").unlink(missing_ok=True)
    out["gx_suite_from_scratch_seconds"], whole = timed(lambda: validate_table(spark, settings, silver, deep=True))
    for result in suite.values():
        save_result(settings, result)
    out["gx_suite_seconds"] = gx_seconds
    out["gx_proven_by_commits"] = any("held on every row" in note for r in suite.values() for note in r.notes)
    out["gx_equal_to_from_scratch"] = {k: [(o.name, o.success) for o in r.outcomes] for k, r in suite.items()} == {
        k: [(o.name, o.success) for o in r.outcomes] for k, r in whole.items()
    }
    out["ratio_reconciliation_vs_silver"] = round(seconds / silver_seconds, 3)
    out["ratio_checks_vs_silver"] = round((seconds + gx_seconds) / silver_seconds, 3)
    return out
