"""The clickstream demo: ad impressions and clicks, a product catalog, and a customer change feed.

It exercises Structured Streaming's semantics from table specs alone (docs/streaming.md):

    landing/impressions ─► bronze.impressions ─► silver.impressions (stream-static join with silver.products)
    landing/clicks      ─► bronze.clicks ──┐          │
    landing/products    ─► silver.products │          ├─► gold.ad_clicks (stream-stream join, 5-minute range)
                                           └──────────┘       └─► gold.clicks_by_category (complete mode)
                                   silver.impressions ─► gold.impressions_10m (tumbling, append)
                                                      ─► gold.impressions_sliding_10m (sliding, update + MERGE)
                                                      ─► gold.user_sessions (session windows, append)
                                                      ─► gold.user_visits (applyInPandasWithState, timeout)
    landing/customer_changes ─► silver.customers (SCD1) + silver.customers_history (SCD2), MERGE per batch

Every watermarked gold table diverts rows behind its watermark to `<table>_late`.
"""

from __future__ import annotations

from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType, TimestampType

from pipelines.datasets.clickstream.records import CHANGE_FIELDS, CLICK_FIELDS, IMPRESSION_FIELDS, PRODUCT_FIELDS
from pipelines.datasets.clickstream.transforms import (
    attribute_clicks,
    clicks_by_category,
    enrich_impressions,
    products_transform,
)
from pipelines.io.landing_parse import LANDED_LINEAGE
from pipelines.run.streams import late_output
from pipelines.spec.tables import FileSource, OutputTable, StaticSource, TableSource, TableSpec, Watermark
from pipelines.transforms.stateful import VisitSummary
from pipelines.transforms.windows import WindowAggregate
from pipelines.write.merge import CdcSink, OverwriteSink, UpsertSink
from pipelines.write.sinks import AppendSink

WATERMARK_DELAY = "10 minutes"
SESSION_GAP_SECONDS = 600

LINEAGE = [*LANDED_LINEAGE, StructField("_batch_id", LongType())]
CUSTOMER_VALUES = ("name", "email", "tier")

BRONZE_IMPRESSIONS = OutputTable(
    "bronze.impressions", StructType([*IMPRESSION_FIELDS, *LINEAGE]), partition_by=("days(_ingested_at)",)
)
BRONZE_CLICKS = OutputTable(
    "bronze.clicks", StructType([*CLICK_FIELDS, *LINEAGE]), partition_by=("days(_ingested_at)",)
)
PRODUCTS = OutputTable("silver.products", StructType(PRODUCT_FIELDS))
IMPRESSIONS = OutputTable(
    "silver.impressions",
    StructType(
        [
            *IMPRESSION_FIELDS[:3],
            StructField("category", StringType()),
            *IMPRESSION_FIELDS[3:],
            StructField("_batch_id", LongType()),
        ]
    ),
    partition_by=("days(event_time)",),
)
CUSTOMERS = OutputTable(
    "silver.customers",
    StructType(
        [
            StructField("customer_id", StringType()),
            *[StructField(c, StringType()) for c in CUSTOMER_VALUES],
            StructField("last_sequence", LongType()),
            StructField("updated_at", TimestampType()),
        ]
    ),
)
CUSTOMERS_HISTORY = OutputTable(
    "silver.customers_history",
    StructType(
        [
            StructField("customer_id", StringType()),
            *[StructField(c, StringType()) for c in CUSTOMER_VALUES],
            StructField("seq", LongType()),
            StructField("valid_from", TimestampType()),
            StructField("valid_to", TimestampType()),
            StructField("is_current", BooleanType()),
            StructField("is_deleted", BooleanType()),
        ]
    ),
)
AD_CLICKS = OutputTable(
    "gold.ad_clicks",
    StructType(
        [
            StructField("click_id", StringType()),
            StructField("impression_id", StringType()),
            StructField("user_id", StringType()),
            StructField("product_id", StringType()),
            StructField("category", StringType()),
            StructField("impression_time", TimestampType()),
            StructField("click_time", TimestampType()),
            StructField("ms_to_click", LongType()),
        ]
    ),
    partition_by=("days(click_time)",),
)
_WINDOW_FIELDS = [
    StructField("window_start", TimestampType()),
    StructField("window_end", TimestampType()),
]
_WINDOW_VALUES = [StructField("impressions", LongType()), StructField("cost_cents", LongType())]
IMPRESSIONS_10M = OutputTable(
    "gold.impressions_10m",
    StructType([*_WINDOW_FIELDS, StructField("category", StringType()), *_WINDOW_VALUES]),
    partition_by=("days(window_start)",),
)
IMPRESSIONS_SLIDING = OutputTable(
    "gold.impressions_sliding_10m",
    StructType([*_WINDOW_FIELDS, StructField("category", StringType()), *_WINDOW_VALUES]),
    partition_by=("days(window_start)",),
)
USER_SESSIONS = OutputTable(
    "gold.user_sessions",
    StructType([*_WINDOW_FIELDS, StructField("user_id", StringType()), *_WINDOW_VALUES]),
    partition_by=("days(window_start)",),
)
USER_VISITS = OutputTable(
    "gold.user_visits",
    StructType(
        [
            StructField("user_id", StringType()),
            StructField("visit_start", TimestampType()),
            StructField("visit_end", TimestampType()),
            StructField("events", LongType()),
            StructField("distinct_category", LongType()),
            StructField("cost_cents", LongType()),
        ]
    ),
    partition_by=("days(visit_start)",),
)
CLICKS_BY_CATEGORY = OutputTable(
    "gold.clicks_by_category",
    StructType(
        [
            StructField("category", StringType()),
            StructField("clicks", LongType()),
            StructField("total_ms_to_click", LongType()),
        ]
    ),
)

_AGGREGATES = (("impressions", "count(*)"), ("cost_cents", "sum(cost_cents)"))
TUMBLING = WindowAggregate("event_time", "tumbling", "10 minutes", group_by=("category",), aggregates=_AGGREGATES)
SLIDING = WindowAggregate(
    "event_time", "sliding", "10 minutes", slide="5 minutes", group_by=("category",), aggregates=_AGGREGATES
)
SESSIONS = WindowAggregate(
    "event_time", "session", f"{SESSION_GAP_SECONDS} seconds", group_by=("user_id",), aggregates=_AGGREGATES
)
VISITS = VisitSummary("user_id", "event_time", "category", "cost_cents", SESSION_GAP_SECONDS)
EVENT_WATERMARK = Watermark("event_time", WATERMARK_DELAY)


def _late(table: OutputTable) -> OutputTable:
    return late_output(f"{table.name}_late")


SPECS = (
    TableSpec(
        output=BRONZE_IMPRESSIONS,
        layer="bronze",
        description="Every landed ad impression line, as read, with lineage and the corrupt record.",
        source=FileSource("impressions", "json", StructType(IMPRESSION_FIELDS)),
        transform=lambda df: df,
        sink=AppendSink(batch_id_column="_batch_id"),
    ),
    TableSpec(
        output=BRONZE_CLICKS,
        layer="bronze",
        description="Every landed ad click line, as read, with lineage and the corrupt record.",
        source=FileSource("clicks", "json", StructType(CLICK_FIELDS)),
        transform=lambda df: df,
        sink=AppendSink(batch_id_column="_batch_id"),
    ),
    TableSpec(
        output=PRODUCTS,
        layer="silver",
        description="The product catalog (reference table): the newest version of each product, from landed CSVs.",
        source=FileSource("products", "csv", StructType(PRODUCT_FIELDS)),
        transform=products_transform,
        sink=UpsertSink(keys=("product_id",), version_column="updated_at"),
        keys=("product_id",),
    ),
    TableSpec(
        output=IMPRESSIONS,
        layer="silver",
        description="Valid impressions enriched with the product category (stream-static join with the catalog).",
        source=TableSource(BRONZE_IMPRESSIONS.name),
        transform=enrich_impressions,
        sink=AppendSink(batch_id_column="_batch_id"),
        keys=("impression_id",),
        secondary_sources=(StaticSource(PRODUCTS.name),),
    ),
    TableSpec(
        output=CUSTOMERS,
        layer="silver",
        description="Customers from the change feed: the live version per customer (SCD1) and every version "
        "with validity ranges (SCD2, silver.customers_history); order- and replay-proof.",
        source=FileSource("customer_changes", "json", StructType(CHANGE_FIELDS)),
        transform=lambda df: df,
        sink=CdcSink(
            history_table=CUSTOMERS_HISTORY.name,
            key="customer_id",
            sequence="seq",
            op_column="op",
            time_column="changed_at",
            value_columns=CUSTOMER_VALUES,
        ),
        keys=("customer_id",),
        extra_outputs=(CUSTOMERS_HISTORY,),
    ),
    TableSpec(
        output=AD_CLICKS,
        layer="gold",
        description="Clicks attributed to their impression (stream-stream join, click within 5 minutes after).",
        source=TableSource(IMPRESSIONS.name),
        transform=attribute_clicks,
        sink=AppendSink(),
        keys=("click_id",),
        watermark=EVENT_WATERMARK,
        secondary_sources=(TableSource(BRONZE_CLICKS.name, watermark=EVENT_WATERMARK),),
        extra_outputs=(_late(AD_CLICKS),),
        late_table=_late(AD_CLICKS).name,
    ),
    TableSpec(
        output=IMPRESSIONS_10M,
        layer="gold",
        description="Impressions and cost per category in 10-minute tumbling windows (append: final windows).",
        source=TableSource(IMPRESSIONS.name),
        transform=TUMBLING,
        sink=AppendSink(),
        keys=TUMBLING.keys,
        watermark=EVENT_WATERMARK,
        extra_outputs=(_late(IMPRESSIONS_10M),),
        late_table=_late(IMPRESSIONS_10M).name,
    ),
    TableSpec(
        output=IMPRESSIONS_SLIDING,
        layer="gold",
        description="Impressions per category in 10-minute windows every 5 minutes (update mode, MERGE by window).",
        source=TableSource(IMPRESSIONS.name),
        transform=SLIDING,
        sink=UpsertSink(keys=SLIDING.keys),
        keys=SLIDING.keys,
        watermark=EVENT_WATERMARK,
        output_mode="update",
        extra_outputs=(_late(IMPRESSIONS_SLIDING),),
        late_table=_late(IMPRESSIONS_SLIDING).name,
    ),
    TableSpec(
        output=USER_SESSIONS,
        layer="gold",
        description="Per-user session windows (10-minute inactivity gap), written once closed.",
        source=TableSource(IMPRESSIONS.name),
        transform=SESSIONS,
        sink=AppendSink(),
        keys=SESSIONS.keys,
        watermark=EVENT_WATERMARK,
        extra_outputs=(_late(USER_SESSIONS),),
        late_table=_late(USER_SESSIONS).name,
    ),
    TableSpec(
        output=USER_VISITS,
        layer="gold",
        description="Per-user visit summaries from applyInPandasWithState (state in the checkpoint, event-time "
        "timeout).",
        source=TableSource(IMPRESSIONS.name),
        transform=VISITS,
        sink=AppendSink(),
        keys=("user_id", "visit_start"),
        watermark=EVENT_WATERMARK,
        extra_outputs=(_late(USER_VISITS),),
        late_table=_late(USER_VISITS).name,
    ),
    TableSpec(
        output=CLICKS_BY_CATEGORY,
        layer="gold",
        description="All-time attributed clicks per category (complete mode, the table is replaced each run).",
        source=TableSource(AD_CLICKS.name),
        transform=clicks_by_category,
        sink=OverwriteSink(),
        keys=("category",),
        output_mode="complete",
    ),
)
