"""The demo dataset: an e-commerce event stream, landed as JSON lines, refined bronze → silver → gold."""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType

import pipelines.authoring as tb

EVENT_TYPES = ("page_view", "cart_add", "cart_remove", "order")
CURRENCIES = ("USD", "EUR", "GBP")
_types = ", ".join(f"'{t}'" for t in EVENT_TYPES)
_currencies = ", ".join(f"'{c}'" for c in CURRENCIES)
LANDED_SCHEMA = tb.schema(
    "event_id string, event_type string, event_time timestamp, user_id string, product_id string, "
    "category string, quantity int, amount decimal(12,2), currency string"
)

# Where events come from: landed JSON files (default), or the `events` Kafka topic with
# TRIBUTARY_EVENTS_SOURCE=kafka (`make demo-kafka`); silver and gold are the same either way.
EVENTS = (
    tb.kafka("events", schema=LANDED_SCHEMA)
    if tb.setting("EVENTS_SOURCE", "files") == "kafka"
    else tb.files("events", "json", LANDED_SCHEMA)
)
tb.landing(
    "bronze.events",
    EVENTS,
    description="Every landed e-commerce event, as read, with lineage and the corrupt record.",
    checks=[tb.row_count(min_rows=1, severity="warn")],
)


@tb.silver(
    write=tb.dedupe("event_id", time="event_time"),
    checks=[
        tb.not_null("event_id"),
        tb.not_null("event_time"),
        tb.not_null("event_date"),
        tb.not_null("user_id"),
        tb.in_set("event_type", EVENT_TYPES),
        tb.in_set("currency", CURRENCIES, severity="warn"),
        tb.between("quantity", 1, 1000, severity="warn"),
        tb.between("amount", 0, severity="warn"),
        tb.row_count_vs_upstream("bronze.events", min_ratio=0.9, severity="warn"),
        tb.fresh("event_time", timedelta(days=1)),
    ],
)
@tb.expect_or_quarantine("event_time_present", "event_time IS NOT NULL", "event_time is missing")
@tb.expect_or_quarantine(tb.plausible_time("event_time"))
@tb.expect_or_quarantine("user_id_present", "user_id IS NOT NULL", "user_id is missing")
@tb.expect_or_quarantine("event_type_known", f"event_type IN ({_types})", "event_type is not a known type")
@tb.expect_or_quarantine(
    "order_is_priced",
    f"event_type <> 'order' OR (quantity > 0 AND amount >= 0 AND currency IN ({_currencies}))",
    "an order needs quantity > 0, amount >= 0 and a known currency",
)
def events(bronze_events: DataFrame) -> DataFrame:
    """Typed, valid, deduplicated events (by event_id); rejected rows go to the quarantine table."""
    return (
        bronze_events.withColumn("event_type", F.lower(F.trim("event_type")))
        .withColumn("currency", F.upper(F.trim("currency")))
        .withColumn("event_date", F.to_date("event_time"))
    )


@tb.gold(
    write=tb.recompute(by="event_date", keys=("event_date", "category", "currency"), where="event_type = 'order'"),
    checks=[
        tb.not_null("event_date"),
        tb.not_null("currency"),
        tb.in_set("currency", CURRENCIES),
        tb.between("orders", 1),
        tb.between("units", 1),
        tb.between("revenue", 0),
        tb.not_null("category", severity="warn"),
        tb.totals_match_upstream(
            "silver.events",
            {"orders": "count(1)", "units": "sum(quantity)", "revenue": "sum(amount)"},
            where="event_type = 'order'",
        ),
    ],
)
def daily_revenue(silver_events: DataFrame) -> DataFrame:
    """Orders, units and revenue per day, category and currency; exact, recomputed per touched day."""
    return (
        silver_events.filter(F.col("event_type") == "order")
        .groupBy("event_date", "category", "currency")
        .agg(
            F.count(F.lit(1)).alias("orders"),
            F.sum("quantity").cast("long").alias("units"),
            F.sum("amount").cast(DecimalType(18, 2)).alias("revenue"),
        )
    )


# Daily revenue delivered to the applications that use it, each change exactly once (docs/sinks.md): to a Kafka
# topic when TRIBUTARY_REVENUE_TOPIC names one, and to an application's PostgreSQL table when
# TRIBUTARY_APP_DB_URL gives its database (keyed by day, category and currency, as the table is).
REVENUE_TOPIC = tb.setting("REVENUE_TOPIC", "")
if REVENUE_TOPIC:
    tb.sink("daily_revenue_to_kafka", "gold.daily_revenue", to=tb.kafka_topic(REVENUE_TOPIC))
APP_DB_URL = tb.setting("APP_DB_URL", "")
if APP_DB_URL:
    tb.sink("daily_revenue_to_app", "gold.daily_revenue", to=tb.jdbc_table(APP_DB_URL, "app.daily_revenue"))


@tb.gold(
    watermark=tb.watermark("event_time", "30 minutes"),
    partition_by="days(window_start)",
    checks=[tb.unique("window_start", "event_type"), tb.in_set("event_type", EVENT_TYPES), tb.between("events", 1)],
)
def event_counts_5m(silver_events: DataFrame) -> DataFrame:
    """Events per type in 5-minute tumbling windows (append mode: a window is written once final)."""
    return (
        silver_events.groupBy(F.window("event_time", "5 minutes"), "event_type")
        .agg(F.count(F.lit(1)).alias("events"))
        .select(
            F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"), "event_type", "events"
        )
    )
