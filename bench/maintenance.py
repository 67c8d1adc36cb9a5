"""Benchmark: a query over a table of many small files, before and after compaction."""

from __future__ import annotations

import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, LongType, StringType, StructField, StructType, TimestampType

from infra.settings import Settings
from infra.spark import get_spark
from pipelines.io.formats import table_format
from pipelines.ops.maintenance.compaction import rewrite_data_files, rewrite_manifests
from pipelines.ops.maintenance.shape import table_shape
from pipelines.spec.tables import MaintenancePolicy, OutputTable

TABLE = "bench.maintenance_small_files"
SCHEMA = StructType(
    [
        StructField("id", LongType()),
        StructField("event_time", TimestampType()),
        StructField("category", StringType()),
        StructField("amount", DecimalType(12, 2)),
    ]
)


def _best_of(spark: SparkSession, sql: str, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        spark.sql(sql).collect()
        best = min(best, time.perf_counter() - started)
    return round(best, 3)


def bench_maintenance(
    settings: Settings, rows: int = 200_000, commits: int = 20, files_per_commit: int = 20, repeats: int = 3
) -> dict:
    """Write `commits` appends of `files_per_commit` small files each, time a query, compact, time it again.

    Returns files, manifests, rows and seconds (best of `repeats` after a warm-up) before and after, plus the
    compaction time. The table is dropped afterwards.
    """
    spark = get_spark(settings)
    fmt = table_format(settings)
    qualified = fmt.qualified(TABLE)
    spark.sql(f"DROP TABLE IF EXISTS {qualified} PURGE")
    fmt.ensure_table(spark, OutputTable(TABLE, SCHEMA))
    per_commit = rows // commits
    started = time.perf_counter()
    for i in range(commits):
        batch = spark.range(i * per_commit, (i + 1) * per_commit).select(
            F.col("id"),
            F.timestamp_seconds(F.lit(1_793_491_200) + F.col("id")).alias("event_time"),
            F.concat(F.lit("category_"), (F.col("id") % 8).cast("string")).alias("category"),
            ((F.col("id") % 10_000) / 100).cast(DecimalType(12, 2)).alias("amount"),
        )
        batch.repartition(files_per_commit).writeTo(qualified).append()
    write_seconds = round(time.perf_counter() - started, 3)
    query = (
        f"SELECT category, count(*) AS n, sum(amount) AS total FROM {qualified} "
        "WHERE amount > 10 GROUP BY category ORDER BY category"
    )
    before = table_shape(spark, settings, TABLE)
    spark.sql(query).collect()  # warm-up
    seconds_before = _best_of(spark, query, repeats)
    expected = spark.sql(query).collect()

    started = time.perf_counter()
    rewritten = rewrite_data_files(spark, settings, TABLE, MaintenancePolicy())
    rewrite_manifests(spark, settings, TABLE)
    compaction_seconds = round(time.perf_counter() - started, 3)
    after = table_shape(spark, settings, TABLE)
    spark.sql(query).collect()
    seconds_after = _best_of(spark, query, repeats)
    same = spark.sql(query).collect() == expected
    spark.sql(f"DROP TABLE IF EXISTS {qualified} PURGE")
    return {
        "rows": before.rows,
        "files_before": before.data_files,
        "files_after": after.data_files,
        "manifests_before": before.manifests,
        "manifests_after": after.manifests,
        "avg_file_bytes_before": before.avg_file_bytes,
        "avg_file_bytes_after": after.avg_file_bytes,
        "rewritten_data_files": rewritten["rewritten_data_files_count"],
        "write_seconds": write_seconds,
        "compaction_seconds": compaction_seconds,
        "query_seconds_before": seconds_before,
        "query_seconds_after": seconds_after,
        "speedup": round(seconds_before / seconds_after, 2) if seconds_after else 0.0,
        "same_result": int(same),
    }
