"""Benchmark: what the quality checks add to the silver stage, on 1 M generated events."""

from __future__ import annotations

import time
from typing import Any

from infra.settings import Settings
from infra.spark import get_spark
from pipelines.authoring.discover import load_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io.formats import table_format
from pipelines.run.runner import run_table
from quality.gx_runner import validate_table
from quality.reconcile import pipelines_of, reconcile_pipeline

TARGET_RATIO = 0.25


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

    started = time.perf_counter()
    import great_expectations  # noqa: F401  (timed: the checks import it lazily)

    result["gx_import_seconds"] = round(time.perf_counter() - started, 2)
    # Once per process (the first check of a Dagster run pays it): GX's first validation and Spark's code
    # generation for the metric queries, measured on 1,000 rows so that it is not attributed to the data size.
    started = time.perf_counter()
    sample = spark.table(table_format(settings).qualified(silver.name)).limit(1000).cache()
    validate_table(spark, settings, silver, df=sample)
    sample.unpersist()
    result["gx_first_use_seconds"] = round(time.perf_counter() - started, 2)
    started = time.perf_counter()
    suite = validate_table(spark, settings, silver)
    result["gx_suite_seconds"] = round(time.perf_counter() - started, 2)
    result["gx_expectations"] = sum(len(r.outcomes) for r in suite.values())
    result["gx_suite_failed"] = sorted(o.name for r in suite.values() for o in r.failed)
    started = time.perf_counter()
    reconciliation = reconcile_pipeline(spark, settings, pipelines_of(registry)[0])
    result["reconciliation_seconds"] = round(time.perf_counter() - started, 2)
    result["reconciliation_passed"] = reconciliation.passed
    started = time.perf_counter()
    validate_table(spark, settings, silver)
    result["gx_suite_second_run_seconds"] = round(time.perf_counter() - started, 2)

    checks = result["gx_suite_seconds"] + result["reconciliation_seconds"]
    once = result["gx_import_seconds"] + result["gx_first_use_seconds"]
    result["checks_seconds"] = round(checks, 2)
    result["ratio_gx_suite_vs_silver"] = round(result["gx_suite_seconds"] / report.seconds, 3)
    result["ratio_checks_vs_silver"] = round(checks / report.seconds, 3)
    result["ratio_checks_with_once_per_process_vs_silver"] = round((checks + once) / report.seconds, 3)
    result["targets"] = {
        "gx_suite_under_25pct_of_silver": result["ratio_gx_suite_vs_silver"] < TARGET_RATIO,
        "checks_under_25pct_of_silver": result["ratio_checks_vs_silver"] < TARGET_RATIO,
    }
    return result
