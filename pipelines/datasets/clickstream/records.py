"""The clickstream's landed records: the fields of a line in each landing folder, as the files declare them."""

from __future__ import annotations

from pyspark.sql.types import DecimalType, IntegerType, LongType, StringType, StructField, TimestampType

IMPRESSION_FIELDS = [
    StructField("impression_id", StringType()),
    StructField("user_id", StringType()),
    StructField("product_id", StringType()),
    StructField("cost_cents", IntegerType()),
    StructField("event_time", TimestampType()),
]
CLICK_FIELDS = [
    StructField("click_id", StringType()),
    StructField("impression_id", StringType()),
    StructField("user_id", StringType()),
    StructField("event_time", TimestampType()),
]
PRODUCT_FIELDS = [
    StructField("product_id", StringType()),
    StructField("name", StringType()),
    StructField("category", StringType()),
    StructField("price", DecimalType(10, 2)),
    StructField("updated_at", TimestampType()),
]
CHANGE_FIELDS = [
    StructField("customer_id", StringType()),
    StructField("op", StringType()),
    StructField("seq", LongType()),
    StructField("name", StringType()),
    StructField("email", StringType()),
    StructField("tier", StringType()),
    StructField("changed_at", TimestampType()),
]
