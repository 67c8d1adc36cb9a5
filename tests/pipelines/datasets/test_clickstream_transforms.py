"""The clickstream dataset's transforms, each on a few hand-built rows with exact expected output.

- `products`: only well-formed catalog rows with an id and a version, in the catalog's columns.
- `impressions` (stream-static join): landed impressions only, category from the catalog or 'unknown'.
- `ad_clicks` (stream-stream join): a click within 5 minutes after its impression, inclusive, with the
  impression's user and the delay in milliseconds.
- `clicks_by_category`, and the window specs (tumbling, sliding, session) as the gold specs use them.
- Every transform's output has the columns and types of the table its spec writes; bronze and the customer
  change feed pass rows through unchanged.

The transforms are taken from the specs (the dataset's registry), so a spec wired to another function is caught too.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType, TimestampType

from pipelines.authoring.load import load_registry
from pipelines.datasets.clickstream.tables import VISITS, user_visits
from pipelines.spec.tables import TableSpec

T = "2026-01-01 "  # the day every event of these tests happens on (UTC)

REGISTRY = load_registry(["pipelines.datasets.clickstream"])
SPECS = tuple(REGISTRY)
# The tables' schemas are inferred with Spark on first use: only read them in tests (the `spark` fixture).
PRODUCTS = REGISTRY.get("silver.products").output
IMPRESSIONS = REGISTRY.get("silver.impressions").output
AD_CLICKS = REGISTRY.get("gold.ad_clicks").output
IMPRESSIONS_10M = REGISTRY.get("gold.impressions_10m").output
IMPRESSIONS_SLIDING = REGISTRY.get("gold.impressions_sliding_10m").output
USER_SESSIONS = REGISTRY.get("gold.user_sessions").output
USER_VISITS = REGISTRY.get("gold.user_visits").output
CLICKS_BY_CATEGORY = REGISTRY.get("gold.clicks_by_category").output


def _spec(name: str) -> TableSpec:
    return next(s for s in SPECS if s.name == name)


def _transform(name: str) -> Callable[..., DataFrame]:
    return _spec(name).transform


def _frame(spark: SparkSession, columns: str, rows: list[tuple], types: dict[str, str] | None = None) -> DataFrame:
    """Rows given as text (and ints), with the columns named in `types` cast in Spark (times are UTC)."""
    df = spark.createDataFrame(rows, columns)
    for name, type_ in (types or {}).items():
        df = df.withColumn(name, F.col(name).cast(type_))
    return df


def _rows(df: DataFrame) -> list[tuple]:
    """Rows sorted, timestamps as UTC text."""
    columns = [
        F.col(f.name).cast("string") if isinstance(f.dataType, TimestampType) else F.col(f.name) for f in df.schema
    ]
    return sorted((tuple(r) for r in df.select(*columns).collect()), key=repr)


def _shape(schema: StructType) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


# --- inputs ------------------------------------------------------------------------------------------------

LANDED = "_corrupt_record string, _file_rejected string, _source_file string"
TIMES = {"event_time": "timestamp"}


@pytest.fixture
def catalog(spark: SparkSession) -> DataFrame:
    rows = [
        ("p1", "Runner", "shoes", "59.90", T + "09:00:00", None, None, "p.csv"),
        ("p2", "Nameless", None, "1.00", T + "09:00:00", None, None, "p.csv"),
        ("p3", "Hat", "hats", "12.50", T + "09:00:00", "p3,Hat,hats,12.50,bad time", None, "p.csv"),
        (None, "No id", "hats", "1.00", T + "09:00:00", None, None, "p.csv"),
        ("p4", "No version", "hats", "1.00", None, None, None, "p.csv"),
    ]
    columns = f"product_id string, name string, category string, price string, updated_at string, {LANDED}"
    return _frame(spark, columns, rows, {"price": "decimal(10,2)", "updated_at": "timestamp"})


@pytest.fixture
def bronze_impressions(spark: SparkSession) -> DataFrame:
    rows = [
        ("i1", "u1", "p1", 10, T + "10:00:00", None, None, "a.json"),
        ("i2", "u1", "p9", 20, T + "10:01:00", None, None, "a.json"),  # not in the catalog
        ("i3", "u2", None, 30, T + "10:02:00", None, None, "a.json"),  # no product
        ("i4", "u2", "p2", 40, T + "10:03:00", None, None, "a.json"),  # product without a category
        ("i5", "u3", "p1", 50, T + "10:04:00", "{bad", None, "a.json"),
        ("i6", "u3", "p1", 60, T + "10:05:00", None, "most lines are corrupt", "b.json"),
        (None, "u3", "p1", 70, T + "10:06:00", None, None, "a.json"),
        ("i8", "u3", "p1", 80, None, None, None, "a.json"),
    ]
    columns = f"impression_id string, user_id string, product_id string, cost_cents int, event_time string, {LANDED}"
    return _frame(spark, columns, rows, TIMES)


@pytest.fixture
def silver_impressions(spark: SparkSession) -> DataFrame:
    rows = [
        ("i1", "u1", "p1", "shoes", 10, T + "10:00:00", 0),
        ("i2", "u1", "p1", "shoes", 20, T + "10:04:00", 0),
        ("i3", "u1", "p3", "hats", 5, T + "10:12:00", 0),
        ("i4", "u2", "p1", "shoes", 1, T + "10:26:00", 1),
    ]
    columns = (
        "impression_id string, user_id string, product_id string, category string, cost_cents int, "
        "event_time string, _batch_id long"
    )
    return _frame(spark, columns, rows, TIMES)


@pytest.fixture
def bronze_clicks(spark: SparkSession) -> DataFrame:
    rows = [
        ("c1", "i1", "u1", T + "10:00:00.250", None, None),
        ("c2", "i1", "u1", T + "10:05:00", None, None),  # exactly 5 minutes: attributed
        ("c3", "i1", "u1", T + "10:05:00.001", None, None),  # too late
        ("c4", "i1", "u1", T + "09:59:59", None, None),  # before the impression
        ("c5", "i2", "u1", T + "10:04:30", "{bad", None),
        ("c6", "i2", "u1", T + "10:04:40", None, "rejected file"),
        ("c7", "i9", "u1", T + "10:00:10", None, None),  # no such impression
        (None, "i2", "u1", T + "10:04:50", None, None),
        ("c9", "i2", "someone", T + "10:06:00", None, None),  # the impression's user is kept
    ]
    columns = (
        "click_id string, impression_id string, user_id string, event_time string, "
        "_corrupt_record string, _file_rejected string"
    )
    return _frame(spark, columns, rows, TIMES)


# --- silver ------------------------------------------------------------------------------------------------


def test_products_keep_well_formed_rows_with_an_id_and_a_version(catalog: DataFrame) -> None:
    out = _transform(PRODUCTS.name)(catalog)
    assert _shape(out.schema) == _shape(PRODUCTS.schema)
    assert [(r[0], r[2], str(r[3]), r[4]) for r in _rows(out)] == [
        ("p1", "shoes", "59.90", T + "09:00:00"),
        ("p2", None, "1.00", T + "09:00:00"),
    ]


def test_impressions_take_the_catalog_category_or_unknown(bronze_impressions: DataFrame, catalog: DataFrame) -> None:
    products = _transform(PRODUCTS.name)(catalog)
    out = _transform(IMPRESSIONS.name)(bronze_impressions, products)
    assert _rows(out) == [
        ("i1", "u1", "p1", "shoes", 10, T + "10:00:00"),
        ("i2", "u1", "p9", "unknown", 20, T + "10:01:00"),
        ("i3", "u2", None, "unknown", 30, T + "10:02:00"),
        ("i4", "u2", "p2", "unknown", 40, T + "10:03:00"),
    ]
    # The sink adds `_batch_id`; everything else is the silver table's.
    assert _shape(out.schema) == _shape(IMPRESSIONS.schema)[:-1]


# --- gold --------------------------------------------------------------------------------------------------


def test_clicks_are_attributed_within_five_minutes_after_their_impression(
    silver_impressions: DataFrame, bronze_clicks: DataFrame
) -> None:
    out = _transform(AD_CLICKS.name)(silver_impressions, bronze_clicks)
    assert _shape(out.schema) == _shape(AD_CLICKS.schema)
    assert _rows(out) == [
        ("c1", "i1", "u1", "p1", "shoes", T + "10:00:00", T + "10:00:00.25", 250),
        ("c2", "i1", "u1", "p1", "shoes", T + "10:00:00", T + "10:05:00", 300_000),
        ("c9", "i2", "u1", "p1", "shoes", T + "10:04:00", T + "10:06:00", 120_000),
    ]


def test_clicks_by_category_counts_clicks_and_sums_the_delay(spark: SparkSession) -> None:
    rows = [("c1", "shoes", 100), ("c2", "shoes", 300), ("c3", "hats", 50), ("c4", None, 7)]
    clicks = _frame(spark, "click_id string, category string, ms_to_click long", rows)
    out = _transform(CLICKS_BY_CATEGORY.name)(clicks)
    assert _shape(out.schema) == _shape(CLICKS_BY_CATEGORY.schema)
    assert _rows(out) == [("hats", 1, 50), ("shoes", 2, 400), (None, 1, 7)]


def test_ten_minute_tumbling_windows_per_category(silver_impressions: DataFrame) -> None:
    out = _transform(IMPRESSIONS_10M.name)(silver_impressions)
    assert _shape(out.schema) == _shape(IMPRESSIONS_10M.schema)
    assert _rows(out) == [
        (T + "10:00:00", T + "10:10:00", "shoes", 2, 30),
        (T + "10:10:00", T + "10:20:00", "hats", 1, 5),
        (T + "10:20:00", T + "10:30:00", "shoes", 1, 1),
    ]


def test_ten_minute_windows_every_five_minutes_per_category(silver_impressions: DataFrame) -> None:
    out = _transform(IMPRESSIONS_SLIDING.name)(silver_impressions)
    assert _shape(out.schema) == _shape(IMPRESSIONS_SLIDING.schema)
    assert _rows(out) == [
        (T + "09:55:00", T + "10:05:00", "shoes", 2, 30),
        (T + "10:00:00", T + "10:10:00", "shoes", 2, 30),
        (T + "10:05:00", T + "10:15:00", "hats", 1, 5),
        (T + "10:10:00", T + "10:20:00", "hats", 1, 5),
        (T + "10:20:00", T + "10:30:00", "shoes", 1, 1),
        (T + "10:25:00", T + "10:35:00", "shoes", 1, 1),
    ]


def test_user_sessions_close_ten_minutes_after_the_last_impression(silver_impressions: DataFrame) -> None:
    out = _transform(USER_SESSIONS.name)(silver_impressions)
    assert _shape(out.schema) == _shape(USER_SESSIONS.schema)
    assert _rows(out) == [
        (T + "10:00:00", T + "10:22:00", "u1", 3, 35),
        (T + "10:26:00", T + "10:36:00", "u2", 1, 1),
    ]


def test_window_specs_merge_by_their_window_keys() -> None:
    for name in (IMPRESSIONS_10M.name, IMPRESSIONS_SLIDING.name):
        assert _spec(name).keys == ("window_start", "window_end", "category")
    assert _spec(USER_SESSIONS.name).keys == ("window_start", "window_end", "user_id")


def test_user_visits_summarize_per_user_into_the_visits_table(spark: SparkSession) -> None:
    # The visit logic itself is tested in tests/pipelines/transforms/test_stateful.py (it needs a stream).
    assert "VISITS" in user_visits.__code__.co_names  # the table's function is the VisitSummary
    assert (VISITS.key, VISITS.time_column, VISITS.label_column, VISITS.amount_column, VISITS.gap_seconds) == (
        "user_id",
        "event_time",
        "category",
        "cost_cents",
        600,
    )
    emitted = spark.createDataFrame([], VISITS.output_schema).schema
    assert _shape(emitted) == _shape(USER_VISITS.schema)


# --- pass-through ------------------------------------------------------------------------------------------


def test_bronze_and_change_feed_specs_pass_rows_through_unchanged(bronze_clicks: DataFrame) -> None:
    passing = [s.name for s in SPECS if s.layer == "bronze" or s.name == "silver.customers"]
    assert passing == ["bronze.impressions", "bronze.clicks", "silver.customers"]
    expected = _rows(bronze_clicks)
    for name in passing:
        out = _transform(name)(bronze_clicks)
        assert out.columns == bronze_clicks.columns
        assert _rows(out) == expected
