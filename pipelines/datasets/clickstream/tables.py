"""The clickstream demo: ad impressions and clicks, a product catalog, and a customer change feed.

    landing/impressions ─► bronze.impressions ─► silver.impressions (stream-static join with silver.products)
    landing/clicks      ─► bronze.clicks ──┐          │
    landing/products    ─► silver.products │          ├─► gold.ad_clicks (stream-stream join, 5-minute range)
                                           └──────────┘       └─► gold.clicks_by_category (complete mode)
                                   silver.impressions ─► gold.impressions_10m (tumbling, append)
                                                      ─► gold.impressions_sliding_10m (sliding, update + MERGE)
                                                      ─► gold.user_sessions (session windows, append)
                                                      ─► gold.user_visits (applyInPandasWithState, timeout)
    landing/customer_changes ─► silver.customers (SCD1) + silver.customers_history (SCD2), MERGE per batch

Every watermarked gold table diverts the rows Spark would drop as late to `<table>_late` (docs/streaming.md).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import pipelines.authoring as tb
from pipelines.transforms.stateful import VisitSummary
from pipelines.transforms.windows import WindowAggregate

IMPRESSION = tb.schema("impression_id string, user_id string, product_id string, cost_cents int, event_time timestamp")
CLICK = tb.schema("click_id string, impression_id string, user_id string, event_time timestamp")
PRODUCT = tb.schema("product_id string, name string, category string, price decimal(10,2), updated_at timestamp")
CHANGE = tb.schema(
    "customer_id string, op string, seq bigint, name string, email string, tier string, changed_at timestamp"
)
ATTRIBUTION_MINUTES = 5
SESSION_GAP_SECONDS = 600
EVENT_TIME = tb.watermark("event_time", "10 minutes")
_AGGREGATES = (("impressions", "count(*)"), ("cost_cents", "sum(cost_cents)"))
TUMBLING = WindowAggregate("event_time", "tumbling", "10 minutes", group_by=("category",), aggregates=_AGGREGATES)
SLIDING = WindowAggregate(
    "event_time", "sliding", "10 minutes", slide="5 minutes", group_by=("category",), aggregates=_AGGREGATES
)
SESSIONS = WindowAggregate(
    "event_time", "session", f"{SESSION_GAP_SECONDS} seconds", group_by=("user_id",), aggregates=_AGGREGATES
)
VISITS = VisitSummary("user_id", "event_time", "category", "cost_cents", SESSION_GAP_SECONDS)
WINDOWED = {"watermark": EVENT_TIME, "late": True, "partition_by": "days(window_start)"}

tb.landing("bronze.impressions", tb.files("impressions", "json", IMPRESSION), description="Every landed ad impression.")
tb.landing("bronze.clicks", tb.files("clicks", "json", CLICK), description="Every landed ad click line, as read.")
tb.landing(
    "silver.customers",
    tb.files("customer_changes", "json", CHANGE),
    write=tb.cdc("customer_id", sequence="seq", values=("name", "email", "tier")),
    description="Customers from the change feed: the live version per customer (SCD1) and every version with "
    "validity ranges (SCD2, silver.customers_history); order- and replay-proof.",
)


def _landed(df: DataFrame, id_column: str) -> DataFrame:
    """Rows that landed well-formed, in an accepted file, with an id and an event time."""
    landed = F.col("_corrupt_record").isNull() & F.col("_file_rejected").isNull()
    return df.filter(landed & F.col(id_column).isNotNull() & F.col("event_time").isNotNull())


@tb.silver(source=tb.files("products", "csv", PRODUCT), write=tb.upsert("product_id", version="updated_at"))
def products(landed: DataFrame) -> DataFrame:
    """The product catalog (reference table): the newest version of each product, from landed CSVs."""
    valid = landed.filter(F.col("_corrupt_record").isNull() & F.col("product_id").isNotNull())
    return valid.filter(F.col("updated_at").isNotNull()).select(*PRODUCT.names)


@tb.silver(keys="impression_id", partition_by="days(event_time)")
def impressions(bronze_impressions: DataFrame, silver_products: DataFrame = tb.static) -> DataFrame:
    """Valid impressions enriched with the product category (stream-static join with the catalog)."""
    catalog = F.broadcast(silver_products.select("product_id", "category"))
    return (
        _landed(bronze_impressions, "impression_id")
        .join(catalog, "product_id", "left")
        .select(
            "impression_id",
            "user_id",
            "product_id",
            F.coalesce("category", F.lit("unknown")).alias("category"),
            "cost_cents",
            "event_time",
        )
    )


@tb.gold(keys="click_id", watermark=EVENT_TIME, late=True, partition_by="days(click_time)")
def ad_clicks(silver_impressions: DataFrame, bronze_clicks: DataFrame) -> DataFrame:
    """Clicks attributed to their impression (stream-stream join, click within 5 minutes after)."""
    shown = silver_impressions.select(
        "impression_id", "user_id", "product_id", "category", F.col("event_time").alias("impression_time")
    )
    clicked = _landed(bronze_clicks, "click_id").select(
        "click_id", F.col("impression_id").alias("clicked_impression_id"), F.col("event_time").alias("click_time")
    )
    in_range = F.expr(
        "impression_id = clicked_impression_id AND click_time >= impression_time AND "
        f"click_time <= impression_time + INTERVAL {ATTRIBUTION_MINUTES} MINUTES"
    )
    elapsed = (F.unix_millis("click_time") - F.unix_millis("impression_time")).alias("ms_to_click")
    return shown.join(clicked, in_range).select(
        "click_id", "impression_id", "user_id", "product_id", "category", "impression_time", "click_time", elapsed
    )


@tb.gold(keys=TUMBLING.keys, **WINDOWED)
def impressions_10m(silver_impressions: DataFrame) -> DataFrame:
    """Impressions and cost per category in 10-minute tumbling windows (append: final windows)."""
    return TUMBLING(silver_impressions)


@tb.gold(write=tb.upsert(*SLIDING.keys), **WINDOWED)
def impressions_sliding_10m(silver_impressions: DataFrame) -> DataFrame:
    """Impressions per category in 10-minute windows every 5 minutes (update mode, MERGE by window)."""
    return SLIDING(silver_impressions)


@tb.gold(keys=SESSIONS.keys, **WINDOWED)
def user_sessions(silver_impressions: DataFrame) -> DataFrame:
    """Per-user session windows (10-minute inactivity gap), written once closed."""
    return SESSIONS(silver_impressions)


@tb.gold(keys=("user_id", "visit_start"), watermark=EVENT_TIME, late=True, partition_by="days(visit_start)")
def user_visits(silver_impressions: DataFrame) -> DataFrame:
    """Per-user visit summaries from applyInPandasWithState (state in the checkpoint, event-time timeout)."""
    return VISITS(silver_impressions)


@tb.gold(write=tb.replace(), keys="category")
def clicks_by_category(gold_ad_clicks: DataFrame) -> DataFrame:
    """All-time attributed clicks per category (complete mode, the table is replaced each run)."""
    return gold_ad_clicks.groupBy("category").agg(
        F.count(F.lit(1)).alias("clicks"), F.sum("ms_to_click").cast("long").alias("total_ms_to_click")
    )
