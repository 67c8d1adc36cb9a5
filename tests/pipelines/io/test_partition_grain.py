"""A default days(<time>) layout coarsened from the upstream's span, and day ranges replaced on coarser partitions."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, IntegerType, StringType, StructField, StructType, TimestampType

from infra.settings import Settings
from pipelines.datasets import default_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.datasets.ecommerce.tables import daily_revenue
from pipelines.io.format_types import DayRange
from pipelines.io.formats import Merge, table_format
from pipelines.io.partition_grain import (
    MAX_FIRST_PARTITIONS,
    described,
    grain_for,
    table_grain,
    time_transform,
    widened,
)
from pipelines.ops.backfill import backfill_days
from pipelines.run.runner import run_table
from pipelines.spec.tables import OutputTable

GOLD = "gold.daily_revenue"
COLUMNS = ("event_date", "category", "currency", "orders", "units", "revenue")
SCHEMA = StructType([StructField("n", IntegerType()), StructField("ts", TimestampType())])


def test_the_grain_is_the_finest_that_keeps_a_first_load_to_few_partitions() -> None:
    assert grain_for(1, 1) == "days"
    assert grain_for(MAX_FIRST_PARTITIONS, 4) == "days"
    assert grain_for(MAX_FIRST_PARTITIONS + 1, 4) == "months"
    assert grain_for(730, 24) == "months"
    assert grain_for(3000, MAX_FIRST_PARTITIONS) == "months"
    assert grain_for(3000, MAX_FIRST_PARTITIONS + 1) == "years"
    assert MAX_FIRST_PARTITIONS == 100


def test_a_range_of_days_widens_to_whole_partitions() -> None:
    days = DayRange("ts", date(2024, 2, 10), date(2024, 12, 3), timestamp=True)
    assert widened(days, "days") == days
    assert widened(days, "months") == DayRange("ts", date(2024, 2, 1), date(2024, 12, 31), timestamp=True)
    assert widened(DayRange("ts", date(2024, 2, 29), date(2024, 2, 29), True), "months").end == date(2024, 2, 29)
    assert widened(days, "years") == DayRange("ts", date(2024, 1, 1), date(2024, 12, 31), timestamp=True)
    assert time_transform(" Months( event_time ) ") == ("months", "event_time")
    assert time_transform("bucket(4, id)") is None


def _upstream(spark: SparkSession, fmt, name: str, days: list[str]) -> None:
    fmt.ensure_table(spark, OutputTable(name, SCHEMA))
    rows = [(i, datetime.fromisoformat(d)) for i, d in enumerate(days)]
    fmt.append(spark.createDataFrame(rows, SCHEMA), name, "test", 0)


def test_a_default_days_layout_follows_the_upstream_span(spark: SparkSession, fresh_settings: Settings) -> None:
    fmt = table_format(fresh_settings)
    every_day = [f"{date(2024, 1, 1) + timedelta(days=i)} 12:00:00" for i in range(730)]
    _upstream(spark, fmt, "bronze.two_years", every_day)
    # Ten days and one far-off time: eleven partitions by day, so days stay.
    _upstream(spark, fmt, "bronze.ten_days", [*every_day[:10], "2099-12-31 23:00:00"])
    every_month = [f"{2001 + i // 12}-{i % 12 + 1:02d}-01 00:00:00" for i in range(101)]
    _upstream(spark, fmt, "bronze.decades", [*every_day[:101], *every_month])
    # A span of at most 100 days is decided from the column's bounds; one day more and the days are counted.
    _upstream(spark, fmt, "bronze.hundred_days", every_day[:100])
    _upstream(spark, fmt, "bronze.hundred_and_one_days", every_day[:101])
    for upstream, grain in (
        ("bronze.two_years", "months"),
        ("bronze.ten_days", "days"),
        ("bronze.decades", "years"),
        ("bronze.hundred_days", "days"),
        ("bronze.hundred_and_one_days", "months"),
    ):
        name = f"silver.from_{upstream.split('.')[1]}"
        fmt.ensure_table(spark, OutputTable(name, SCHEMA, ("days(ts)",), grain_from=upstream))
        assert table_grain(spark, fmt.qualified(name), "ts") == grain, name
    # The author's layout is kept whatever the data; an upstream without the column leaves the default as it is.
    fmt.ensure_table(spark, OutputTable("silver.declared", SCHEMA, ("days(ts)",)))
    assert table_grain(spark, fmt.qualified("silver.declared"), "ts") == "days"
    other = StructType([StructField("n", IntegerType()), StructField("at", TimestampType())])
    fmt.ensure_table(spark, OutputTable("silver.other", other, ("days(at)",), grain_from="bronze.two_years"))
    assert table_grain(spark, fmt.qualified("silver.other"), "at") == "days"


def test_a_default_identity_partition_on_a_date_column_follows_the_upstream_span(
    spark: SparkSession, fresh_settings: Settings
) -> None:
    """A `recompute(by=<date>)` table is partitioned by that date: two years of days make 24 monthly partitions,
    ten days stay ten identity partitions, and a non-date column is left as it is."""
    fmt = table_format(fresh_settings)
    schema = StructType([StructField("day", DateType()), StructField("region", StringType())])
    for name, days in (("silver.two_years", 730), ("silver.ten_days", 10)):
        fmt.ensure_table(spark, OutputTable(name, schema))
        rows = [(date(2024, 1, 1) + timedelta(days=i), "eu") for i in range(days)]
        fmt.append(spark.createDataFrame(rows, schema), name, "test", 0)
    for upstream, fields in (("silver.two_years", ["day_month", "region"]), ("silver.ten_days", ["day", "region"])):
        name = f"gold.from_{upstream.split('.')[1]}"
        fmt.ensure_table(spark, OutputTable(name, schema, ("day", "region"), grain_from=upstream))
        partition = spark.table(f"{fmt.qualified(name)}.partitions").schema["partition"].dataType
        assert partition.names == fields, name
    assert table_grain(spark, fmt.qualified("gold.from_two_years"), "day") == "months"
    assert table_grain(spark, fmt.qualified("gold.from_ten_days"), "day") == "days"


def test_replacing_days_of_a_monthly_table_keeps_the_other_days_of_its_months(
    spark: SparkSession, fresh_settings: Settings
) -> None:
    fmt = table_format(fresh_settings)
    name = "silver.monthly"
    fmt.ensure_table(spark, OutputTable(name, SCHEMA, ("months(ts)",)))
    before = ["2024-02-29 23:59:59", "2024-03-01 00:00:00", "2024-03-15 08:00:00", "2024-03-15 23:59:59"]
    before += ["2024-03-16 00:00:00", "2024-03-31 23:59:59", "2024-04-01 00:00:00", "2024-04-20 00:00:00"]
    fmt.append(
        spark.createDataFrame([(i, datetime.fromisoformat(d)) for i, d in enumerate(before)], SCHEMA), name, "t", 0
    )
    new = spark.createDataFrame([(100, datetime(2024, 3, 15, 12)), (101, datetime(2024, 4, 1, 1))], SCHEMA)

    fmt.replace_days(new, name, DayRange("ts", date(2024, 3, 15), date(2024, 4, 1), timestamp=True), "backfill")

    rows = sorted((r.n, r.ts.isoformat(" ")) for r in spark.table(fmt.qualified(name)).collect())
    assert rows == [
        (0, "2024-02-29 23:59:59"),
        (1, "2024-03-01 00:00:00"),
        (7, "2024-04-20 00:00:00"),
        (100, "2024-03-15 12:00:00"),
        (101, "2024-04-01 01:00:00"),
    ]
    operations = [r.operation for r in spark.sql(f"SELECT operation FROM {fmt.qualified(name)}.snapshots").collect()]
    assert operations == ["append", "overwrite"]  # one commit replaced the range


def test_the_described_layout_says_when_it_may_become_coarser() -> None:
    assert (
        described(("days(ts)",), "bronze.x")
        == "days(ts) (months or years when the first load holds more than 100 days)"
    )
    assert described(("days(ts)",), None) == "days(ts)"
    assert described(("region",), "bronze.x") == "region"
    assert (
        described(("day",), "silver.x", ("day",))
        == "day (months or years when the first load holds more than 100 days)"
    )
    assert described(("day",), None, ("day",)) == "day"
    assert described((), None) == "none"


def test_a_backfilled_day_of_a_monthly_gold_table_is_recomputed_and_its_months_other_days_kept(
    spark: SparkSession, fresh_settings: Settings
) -> None:
    """Five months of events make the demo's daily revenue monthly; two days of one month are tampered with and
    one is backfilled: it equals the recomputation from silver, the other keeps its tampered values."""
    s = fresh_settings
    registry = default_registry()
    generate(s.landing, rows=1500, files=3, seed=11, start=datetime(2026, 1, 1), days=150)
    for name in ("bronze.events", "silver.events", GOLD):
        run_table(spark, s, registry.get(name))
    fmt = table_format(s)
    assert table_grain(spark, fmt.qualified(GOLD), "event_date") == "months"
    silver = fmt.read(spark, "silver.events")
    expected = {tuple(r[:3]): tuple(r[3:]) for r in daily_revenue(silver).select(*COLUMNS).collect()}
    assert expected  # (event_date, category, currency) -> (orders, units, revenue)
    gold = fmt.read(spark, GOLD)
    days = sorted({k[0] for k in expected if k[0].month == 2})[:2]
    zeroed = gold.filter(F.col("event_date").isin(days)).withColumn("revenue", F.lit(0).cast("decimal(18,2)"))
    fmt.merge(zeroed, GOLD, Merge(("event_date", "category", "currency")))

    backfill_days(spark, s, registry.get(GOLD), days[0], days[0])

    got = {tuple(r[:3]): tuple(r[3:]) for r in fmt.read(spark, GOLD).select(*COLUMNS).collect()}
    assert {k: v for k, v in got.items() if k[0] != days[1]} == {k: v for k, v in expected.items() if k[0] != days[1]}
    assert {k for k in got if k[0] == days[1]} == {k for k in expected if k[0] == days[1]}
    assert all(v[2] == 0 for k, v in got.items() if k[0] == days[1])  # not backfilled: as it was
