"""The demo dataset: an e-commerce event stream, landed as JSON lines, refined bronze → silver → gold."""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pipelines.io.formats import TableFormat
from pipelines.io.landing_parse import LANDED_LINEAGE
from pipelines.spec.expectations import (
    between,
    fresh,
    in_set,
    not_null,
    row_count,
    row_count_vs_upstream,
    schema_matches,
    totals_match_upstream,
    unique,
)
from pipelines.spec.rules import Rule, apply_rules, plausible_time
from pipelines.spec.tables import FileSource, OutputTable, TableSource, TableSpec, Watermark
from pipelines.write.sinks import AppendSink, RecomputeMergeSink, ValidateDedupeSink

EVENT_TYPES = ("page_view", "cart_add", "cart_remove", "order")
CURRENCIES = ("USD", "EUR", "GBP")
AMOUNT = DecimalType(12, 2)

EVENT_FIELDS = [
    StructField("event_id", StringType()),
    StructField("event_type", StringType()),
    StructField("event_time", TimestampType()),
    StructField("user_id", StringType()),
    StructField("product_id", StringType()),
    StructField("category", StringType()),
    StructField("quantity", IntegerType()),
    StructField("amount", AMOUNT),
    StructField("currency", StringType()),
]
EVENT_COLUMNS = tuple(f.name for f in EVENT_FIELDS)
LANDED_SCHEMA = StructType(EVENT_FIELDS)

BRONZE = OutputTable(
    "bronze.events",
    StructType(
        [
            *EVENT_FIELDS,
            *LANDED_LINEAGE,
            StructField("_batch_id", LongType()),
        ]
    ),
    partition_by=("days(_ingested_at)",),
)
SILVER = OutputTable(
    "silver.events",
    StructType(
        [
            *EVENT_FIELDS,
            StructField("event_date", DateType()),
            StructField("_source_file", StringType()),
            StructField("_batch_id", LongType()),
        ]
    ),
    partition_by=("days(event_time)",),
)
QUARANTINE = OutputTable(
    "silver.events_quarantine",
    StructType(
        [
            StructField("event_id", StringType()),
            StructField("reasons", ArrayType(StringType())),
            StructField("raw_record", StringType()),
            StructField("_source_file", StringType()),
            StructField("_ingested_at", TimestampType()),
            StructField("_batch_id", LongType()),
        ]
    ),
)
DAILY_REVENUE = OutputTable(
    "gold.daily_revenue",
    StructType(
        [
            StructField("event_date", DateType()),
            StructField("category", StringType()),
            StructField("currency", StringType()),
            StructField("orders", LongType()),
            StructField("units", LongType()),
            StructField("revenue", DecimalType(18, 2)),
        ]
    ),
    partition_by=("event_date",),
)
EVENT_COUNTS = OutputTable(
    "gold.event_counts_5m",
    StructType(
        [
            StructField("window_start", TimestampType()),
            StructField("window_end", TimestampType()),
            StructField("event_type", StringType()),
            StructField("events", LongType()),
        ]
    ),
    partition_by=("days(window_start)",),
)

_types = ", ".join(f"'{t}'" for t in EVENT_TYPES)
_currencies = ", ".join(f"'{c}'" for c in CURRENCIES)
SILVER_RULES = (
    Rule(
        "well_formed",
        "_corrupt_record IS NULL",
        "quarantine",
        "line is not valid JSON or a field has the wrong type",
    ),
    Rule(
        "file_rejected",
        "_file_rejected IS NULL",
        "quarantine",
        "the landed file was rejected whole (see bronze.events_files)",
    ),
    Rule(
        "no_rescued_data",
        "_rescued_data IS NULL",
        "warn",
        "the landed record has fields the schema does not declare (kept in bronze._rescued_data)",
    ),
    Rule("event_id_present", "event_id IS NOT NULL AND event_id <> ''", "quarantine", "event_id is missing"),
    Rule("event_time_present", "event_time IS NOT NULL", "quarantine", "event_time is missing"),
    plausible_time("event_time"),
    Rule("user_id_present", "user_id IS NOT NULL", "quarantine", "user_id is missing"),
    Rule("event_type_known", f"event_type IN ({_types})", "quarantine", "event_type is not a known type"),
    Rule(
        "order_is_priced",
        f"event_type <> 'order' OR (quantity > 0 AND amount >= 0 AND currency IN ({_currencies}))",
        "quarantine",
        "an order needs quantity > 0, amount >= 0 and a known currency",
    ),
)


# Dataset-level expectations, run by Great Expectations as asset checks: `error` ones block downstream assets,
# `warn` ones are recorded. The silver rules above already guarantee the `error` ones; they catch regressions.
BRONZE_SUITE = (
    schema_matches(),
    not_null("_source_file"),
    not_null("_ingested_at"),
    not_null("_batch_id"),
    row_count(min_rows=1, severity="warn"),
)
SILVER_SUITE = (
    schema_matches(),
    not_null("event_id"),
    not_null("event_time"),
    not_null("event_date"),
    not_null("user_id"),
    unique("event_id"),
    in_set("event_type", EVENT_TYPES),
    row_count_vs_upstream(BRONZE.name, max_ratio=1.0),
    in_set("currency", CURRENCIES, severity="warn"),
    between("quantity", 1, 1000, severity="warn"),
    between("amount", 0, severity="warn"),
    row_count_vs_upstream(BRONZE.name, min_ratio=0.9, severity="warn"),
    fresh("event_time", timedelta(days=1)),
)
DAILY_REVENUE_SUITE = (
    schema_matches(),
    not_null("event_date"),
    not_null("currency"),
    unique("event_date", "category", "currency"),
    in_set("currency", CURRENCIES),
    between("orders", 1),
    between("units", 1),
    between("revenue", 0),
    not_null("category", severity="warn"),
    totals_match_upstream(
        SILVER.name,
        {"orders": "count(1)", "units": "sum(quantity)", "revenue": "sum(amount)"},
        where="event_type = 'order'",
    ),
)
EVENT_COUNTS_SUITE = (
    schema_matches(),
    not_null("window_start"),
    not_null("window_end"),
    unique("window_start", "event_type"),
    in_set("event_type", EVENT_TYPES),
    between("events", 1),
)


def bronze_transform(df: DataFrame) -> DataFrame:
    """Bronze keeps every landed line as read, with its lineage; nothing is filtered."""
    return df


def silver_transform(df: DataFrame) -> DataFrame:
    """Type and clean bronze rows, keep the original record, and evaluate the row rules."""
    business = F.to_json(F.struct(*[F.col(c) for c in EVENT_COLUMNS]))
    # The record is serialized before cleaning, so the quarantine shows the values as they landed.
    cleaned = (
        df.withColumn("raw_record", F.coalesce(F.col("_corrupt_record"), business))
        .withColumn("event_type", F.lower(F.trim("event_type")))
        .withColumn("currency", F.upper(F.trim("currency")))
        .withColumn("event_date", F.to_date("event_time"))
    )
    return apply_rules(cleaned, SILVER_RULES)


def _orders_by_day(df: DataFrame) -> DataFrame:
    return df.filter(F.col("event_type") == "order").select("event_date")


def _recompute_daily_revenue(spark: SparkSession, fmt: TableFormat, days: list[dict]) -> DataFrame:
    day_filter = F.col("event_date").isin([d["event_date"] for d in days])
    return (
        spark.table(fmt.qualified(SILVER.name))
        .filter(day_filter & (F.col("event_type") == "order"))
        .groupBy("event_date", "category", "currency")
        .agg(
            F.count(F.lit(1)).alias("orders"),
            F.sum("quantity").cast("long").alias("units"),
            F.sum("amount").cast(DecimalType(18, 2)).alias("revenue"),
        )
    )


def counts_5m_transform(df: DataFrame) -> DataFrame:
    """Events per type in 5-minute tumbling windows (the spec's watermark is applied before this)."""
    return (
        df.groupBy(F.window("event_time", "5 minutes"), "event_type")
        .agg(F.count(F.lit(1)).alias("events"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "event_type",
            "events",
        )
    )


SPECS = (
    TableSpec(
        output=BRONZE,
        layer="bronze",
        description="Every landed e-commerce event line, as read, with lineage and the corrupt record.",
        source=FileSource("events", "json", LANDED_SCHEMA),
        transform=bronze_transform,
        sink=AppendSink(batch_id_column="_batch_id"),
        expectations=BRONZE_SUITE,
    ),
    TableSpec(
        output=SILVER,
        layer="silver",
        description="Typed, valid, deduplicated events (by event_id); rejected rows go to the quarantine table.",
        source=TableSource(BRONZE.name),
        transform=silver_transform,
        sink=ValidateDedupeSink(
            quarantine_table=QUARANTINE.name,
            keys=("event_id",),
            time_column="event_time",
            columns=tuple(f.name for f in SILVER.schema.fields),
            quarantine_columns=tuple(f.name for f in QUARANTINE.schema.fields),
            rules=SILVER_RULES,
        ),
        keys=("event_id",),
        extra_outputs=(QUARANTINE,),
        expectations=SILVER_SUITE,
    ),
    TableSpec(
        output=DAILY_REVENUE,
        layer="gold",
        description="Orders, units and revenue per day, category and currency; exact, recomputed per touched day.",
        source=TableSource(SILVER.name),
        transform=lambda df: df,
        sink=RecomputeMergeSink(
            keys=("event_date", "category", "currency"),
            affected=_orders_by_day,
            recompute=_recompute_daily_revenue,
        ),
        keys=("event_date", "category", "currency"),
        expectations=DAILY_REVENUE_SUITE,
    ),
    TableSpec(
        output=EVENT_COUNTS,
        layer="gold",
        description="Events per type in 5-minute tumbling windows (append mode: a window is written once final).",
        source=TableSource(SILVER.name),
        transform=counts_5m_transform,
        sink=AppendSink(),
        watermark=Watermark("event_time", "30 minutes"),
        expectations=EVENT_COUNTS_SUITE,
    ),
)
