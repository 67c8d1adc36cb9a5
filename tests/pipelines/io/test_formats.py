"""Staged appends (write-audit-publish): invisible and uncommitted until published, committed exactly once after;
and how a stream splits a table's files into tasks."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql.types import IntegerType, StructField, StructType

from infra.settings import Settings
from pipelines.io.formats import table_format
from pipelines.spec.tables import OutputTable

SCHEMA = StructType([StructField("n", IntegerType())])


def _values(spark: SparkSession, fmt, name: str) -> list[int]:
    return sorted(r.n for r in spark.table(fmt.qualified(name)).collect())


def test_a_staged_batch_is_committed_only_by_its_publication(spark: SparkSession, fresh_settings: Settings) -> None:
    fmt = table_format(fresh_settings)
    fmt.ensure_table(spark, OutputTable("bronze.staged", SCHEMA))
    rows = spark.createDataFrame([(1,), (2,)], SCHEMA)

    abandoned = fmt.stage_append(rows, "bronze.staged", "w", 0)  # a run killed before publishing
    assert abandoned.rows == 2
    assert sorted(r.n for r in fmt.read_staged(spark, "bronze.staged", abandoned).collect()) == [1, 2]
    assert _values(spark, fmt, "bronze.staged") == []
    assert fmt.committed_batches(spark, "bronze.staged", "w") == set()

    staged = fmt.stage_append(rows, "bronze.staged", "w", 0)  # its replay stages again, then publishes
    fmt.publish(spark, "bronze.staged", staged)
    assert _values(spark, fmt, "bronze.staged") == [1, 2]
    assert fmt.committed_batches(spark, "bronze.staged", "w") == {0}
    assert fmt.committed_batches(spark, "bronze.staged", "other") == set()

    # Main moves between staging and publishing (another commit): the cherry-pick copies the snapshot without
    # its custom summary, and the batch is still recognised as committed (by the published WAP id).
    later = fmt.stage_append(spark.createDataFrame([(3,)], SCHEMA), "bronze.staged", "w", 1)
    assert sorted(r.n for r in fmt.read_staged(spark, "bronze.staged", later).collect()) == [3]
    fmt.append(spark.createDataFrame([(9,)], SCHEMA), "bronze.staged", "x", 0)
    fmt.publish(spark, "bronze.staged", later)
    assert _values(spark, fmt, "bronze.staged") == [1, 2, 3, 9]
    assert fmt.committed_batches(spark, "bronze.staged", "w") == {0, 1}
    assert fmt.committed_batches(spark, "bronze.staged", "x") == {0}
    assert fmt.committed_batches(spark, "bronze.staged", "w", since=1) == {1}  # the walk stops below `since`
    assert fmt.append(spark.createDataFrame([(4,), (5,)], SCHEMA), "bronze.staged", "w", 2) == 2


def test_a_stream_reads_a_first_load_of_several_files_in_several_tasks(
    spark: SparkSession, fresh_settings: Settings, tmp_path
) -> None:
    # Eight appends make eight small files; each weighs 1 MB in Iceberg's split planning and a split holds 4 MB,
    # so a micro-batch reads them in two tasks (Iceberg's defaults put every one into a single task).
    fmt = table_format(fresh_settings)
    fmt.ensure_table(spark, OutputTable("bronze.split", SCHEMA))
    for n in range(8):
        fmt.append(spark.createDataFrame([(n,)], SCHEMA), "bronze.split", "w", n)
    tasks: list[int] = []
    query = (
        fmt.read_stream(spark, "bronze.split")
        .writeStream.foreachBatch(lambda df, _: tasks.append(df.rdd.getNumPartitions()))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert tasks == [2]
