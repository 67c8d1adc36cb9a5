"""The `wide_csv` chain as an Apache Spark Declarative Pipelines user writes it (run by `spark-pipelines run` in
bench/sdp_peer.py): landed CSV files into a streaming table, a streaming table unique by the two-column key, and a
materialized view of lines, units and amount per day and region. The landing folder and the CSV schema come from
the pipeline spec's configuration."""

from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

spark = SparkSession.active()


@dp.table
def bronze_wide_orders() -> DataFrame:
    return (
        spark.readStream.format("csv")
        .option("header", "true")
        .schema(spark.conf.get("wide.schema"))
        .load(spark.conf.get("wide.landing"))
        .withColumn("_source_file", F.col("_metadata.file_path"))
        .withColumn("_ingested_at", F.current_timestamp())
    )


@dp.table
def silver_wide_orders() -> DataFrame:
    return spark.readStream.table("bronze_wide_orders").dropDuplicates(["order_id", "line_no"])


@dp.materialized_view
def gold_wide_daily() -> DataFrame:
    return (
        spark.read.table("silver_wide_orders")
        .groupBy("order_date", "region")
        .agg(F.count(F.lit(1)).alias("lines"), F.sum("quantity").alias("units"), F.sum("amount").alias("amount"))
    )
