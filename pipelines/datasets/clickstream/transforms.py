"""The clickstream's transforms: catalog cleaning, the stream-static and stream-stream joins, clicks per category."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.datasets.clickstream.records import PRODUCT_FIELDS

ATTRIBUTION_MINUTES = 5


def _landed(df: DataFrame, id_column: str) -> DataFrame:
    """Rows that landed well-formed, in an accepted file, with an id and an event time."""
    landed = F.col("_corrupt_record").isNull() & F.col("_file_rejected").isNull()
    return df.filter(landed & F.col(id_column).isNotNull() & F.col("event_time").isNotNull())


def products_transform(df: DataFrame) -> DataFrame:
    """Typed catalog rows from the landed CSV files (rows without an id or version are not a catalog entry)."""
    valid = df.filter(F.col("_corrupt_record").isNull() & F.col("product_id").isNotNull())
    return valid.filter(F.col("updated_at").isNotNull()).select(*[f.name for f in PRODUCT_FIELDS])


def enrich_impressions(impressions: DataFrame, products: DataFrame) -> DataFrame:
    """Stream-static join: each impression takes its product's category as the catalog stands when it is read."""
    catalog = products.select("product_id", "category")
    return (
        _landed(impressions, "impression_id")
        .join(F.broadcast(catalog), "product_id", "left")
        .select(
            "impression_id",
            "user_id",
            "product_id",
            F.coalesce("category", F.lit("unknown")).alias("category"),
            "cost_cents",
            "event_time",
        )
    )


def attribute_clicks(impressions: DataFrame, clicks: DataFrame) -> DataFrame:
    """Stream-stream join: a click belongs to its impression if it comes within 5 minutes after it."""
    shown = impressions.select(
        "impression_id", "user_id", "product_id", "category", F.col("event_time").alias("impression_time")
    )
    clicked = _landed(clicks, "click_id").select(
        "click_id", F.col("impression_id").alias("clicked_impression_id"), F.col("event_time").alias("click_time")
    )
    in_range = F.expr(
        "impression_id = clicked_impression_id AND click_time >= impression_time AND "
        f"click_time <= impression_time + INTERVAL {ATTRIBUTION_MINUTES} MINUTES"
    )
    return shown.join(clicked, in_range).select(
        "click_id",
        "impression_id",
        "user_id",
        "product_id",
        "category",
        "impression_time",
        "click_time",
        (F.unix_millis("click_time") - F.unix_millis("impression_time")).alias("ms_to_click"),
    )


def clicks_by_category(df: DataFrame) -> DataFrame:
    """All-time clicks per category (complete mode re-emits the whole table each batch)."""
    return df.groupBy("category").agg(
        F.count(F.lit(1)).alias("clicks"), F.sum("ms_to_click").cast("long").alias("total_ms_to_click")
    )
