"""The tables of the `wide_csv` benchmark, declared as a user would: landed CSV orders (`bench.wide_data`), silver
unique by a two-column key, and a gold aggregate per day and region kept exact."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import pipelines.authoring as tb
from bench.wide_data import WIDE_SCHEMA

FOLDER = "wide_orders"
BRONZE, SILVER, GOLD = "bronze.wide_orders", "silver.wide_orders", "gold.wide_daily"
GOLD_COLUMNS = ("order_date", "region", "lines", "units", "amount")

tb.landing(BRONZE, tb.files(FOLDER, "csv", WIDE_SCHEMA))


@tb.silver(write=tb.dedupe("order_id", "line_no", time="ordered_at"))
def wide_orders(bronze_wide_orders: DataFrame) -> DataFrame:
    """Each order line once."""
    return bronze_wide_orders


@tb.gold(write=tb.recompute(by="order_date", keys=("order_date", "region")))
def wide_daily(silver_wide_orders: DataFrame) -> DataFrame:
    """Order lines, units and amount per day and region."""
    return daily(silver_wide_orders)


def daily(orders: DataFrame) -> DataFrame:
    """The gold aggregate (also what the plain Spark side computes)."""
    return orders.groupBy("order_date", "region").agg(
        F.count(F.lit(1)).alias("lines"), F.sum("quantity").alias("units"), F.sum("amount").alias("amount")
    )
