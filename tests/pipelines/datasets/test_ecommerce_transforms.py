"""The e-commerce dataset's transforms, each on a few hand-built rows with exact expected output.

- bronze: every landed row passes through unchanged.
- silver: the record as landed is kept (`raw_record`, the corrupt line when there is one), event type and
  currency are normalised, `event_date` derived, and the silver rules give `_reasons` / `_warnings`.
- gold daily revenue: `affected` names the days with orders; `recompute` rebuilds orders, units and revenue of
  exactly those days from silver (read here from a temporary view standing in for the table).
- gold event counts: events per type in 5-minute tumbling windows.
- Every transform's output has the columns and types of the table its spec writes.

The functions are taken from the specs (the dataset's registry), so a spec wired to another function is caught too.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType, TimestampType

from pipelines.authoring.load import load_registry
from pipelines.datasets.ecommerce.tables import LANDED_SCHEMA
from pipelines.spec.tables import TableSpec
from pipelines.write.validate import quarantine_identity

T = "2026-01-01 "  # the day most events of these tests happen on (UTC)

REGISTRY = load_registry(["pipelines.datasets.ecommerce"])
SPECS = tuple(REGISTRY)
# The tables' schemas are inferred with Spark on first use: only read them in tests (the `spark` fixture).
BRONZE = REGISTRY.get("bronze.events").output
SILVER = REGISTRY.get("silver.events").output
QUARANTINE = next(o for o in REGISTRY.get("silver.events").extra_outputs if o.name == "silver.events_quarantine")
DAILY_REVENUE = REGISTRY.get("gold.daily_revenue").output
EVENT_COUNTS = REGISTRY.get("gold.event_counts_5m").output
EVENT_COLUMNS = tuple(LANDED_SCHEMA.names)


def _spec(name: str) -> TableSpec:
    return next(s for s in SPECS if s.name == name)


def _typed(df: DataFrame, schema: StructType) -> DataFrame:
    """Cast the columns of `df` that `schema` declares to their declared types (times as UTC text)."""
    for f in schema.fields:
        if f.name in df.columns:
            df = df.withColumn(f.name, F.col(f.name).cast(f.dataType))
    return df


def _rows(df: DataFrame, *columns: str) -> list[tuple]:
    """`columns` (default all) of every row, sorted, timestamps as UTC text."""
    fields = [df.schema[name] for name in columns or df.columns]
    selected = [
        F.col(f.name).cast("string") if isinstance(f.dataType, TimestampType) else F.col(f.name) for f in fields
    ]
    return sorted((tuple(r) for r in df.select(*selected).collect()), key=repr)


def _shape(schema: StructType, names: list[str] | None = None) -> list[tuple[str, str]]:
    """(name, type) of the columns `names` (default all), in the order of `names`."""
    return [(name, schema[name].dataType.simpleString()) for name in names or schema.names]


# --- bronze ------------------------------------------------------------------------------------------------


def _bronze_columns() -> str:
    """The bronze columns as text (quantity int, _batch_id long), for `createDataFrame`."""
    return ", ".join(
        f"{f.name} {'int' if f.name == 'quantity' else 'long' if f.name == '_batch_id' else 'string'}"
        for f in BRONZE.schema.fields
    )


def _bronze_row(**values: object) -> tuple:
    """A bronze row: a priced order by default, `values` replacing fields (text; cast to the bronze schema)."""
    row: dict[str, object] = {
        "event_id": "e0",
        "event_type": "order",
        "event_time": T + "10:00:00",
        "user_id": "u1",
        "product_id": "p1",
        "category": "shoes",
        "quantity": 2,
        "amount": "10.00",
        "currency": "USD",
        "_corrupt_record": None,
        "_rescued_data": None,
        "_file_rejected": None,
        "_source_file": "a.json",
        "_ingested_at": T + "10:05:00",
        "_batch_id": 3,
    }
    row.update(values)
    return tuple(row[f.name] for f in BRONZE.schema.fields)


@pytest.fixture
def bronze(spark: SparkSession) -> DataFrame:
    rows = [
        _bronze_row(event_id="e1", event_type=" Order ", currency=" usd"),
        _bronze_row(event_id="e2", event_type="PAGE_VIEW", quantity=None, amount=None, currency=None, category=None),
        _bronze_row(**dict.fromkeys(EVENT_COLUMNS), _corrupt_record='{"event_id": '),  # a corrupt line
        _bronze_row(event_id="e4", event_time=T + "23:59:59", _rescued_data='{"coupon":"X"}', amount="-1.00"),
        _bronze_row(event_id="e5", _file_rejected="most lines are corrupt"),
    ]
    return _typed(spark.createDataFrame(rows, _bronze_columns()), BRONZE.schema)


def test_bronze_keeps_every_landed_row_as_read(bronze: DataFrame) -> None:
    out = _spec(BRONZE.name).transform(bronze)
    assert out.columns == bronze.columns
    assert _rows(out) == _rows(bronze)


# --- silver ------------------------------------------------------------------------------------------------


def test_silver_normalises_type_and_currency_and_derives_the_date(bronze: DataFrame) -> None:
    out = _spec(SILVER.name).transform(bronze)
    assert _rows(out, "event_id", "event_type", "currency", "event_date") == [
        ("e1", "order", "USD", date(2026, 1, 1)),
        ("e2", "page_view", None, date(2026, 1, 1)),
        ("e4", "order", "USD", date(2026, 1, 1)),
        ("e5", "order", "USD", date(2026, 1, 1)),
        (None, None, None, None),
    ]


def test_silver_keeps_the_record_as_it_landed_for_rejected_rows(bronze: DataFrame) -> None:
    out = _spec(SILVER.name).transform(bronze)
    # Valid rows carry no record (only the quarantine keeps it); e4 and e5 fail a rule, the corrupt line too. The
    # sink renders the carried record as the quarantine table stores it.
    out = out.withColumn("raw_record", quarantine_identity(out))
    assert dict(_rows(out, "event_id", "raw_record")) == {
        "e1": None,
        "e2": None,
        None: '{"event_id": ',
        "e4": '{"event_id":"e4","event_type":"order","event_time":"2026-01-01T23:59:59.000Z","user_id":"u1",'
        '"product_id":"p1","category":"shoes","quantity":2,"amount":-1.00,"currency":"USD"}',
        "e5": '{"event_id":"e5","event_type":"order","event_time":"2026-01-01T10:00:00.000Z","user_id":"u1",'
        '"product_id":"p1","category":"shoes","quantity":2,"amount":10.00,"currency":"USD"}',
    }


def test_silver_rules_are_evaluated_after_cleaning(bronze: DataFrame) -> None:
    out = _spec(SILVER.name).transform(bronze)
    assert {r[0]: (list(r[1]), list(r[2])) for r in _rows(out, "event_id", "_reasons", "_warnings")} == {
        "e1": ([], []),  # ' Order ' and ' usd' pass once normalised
        "e2": ([], []),
        # A corrupt line has no fields: every presence rule fails, and with no event type so does the order
        # rule (`event_type <> 'order'` is NULL).
        None: (
            [
                "well_formed",
                "event_id_present",
                "event_time_present",
                "user_id_present",
                "event_type_known",
                "order_is_priced",
            ],
            [],
        ),
        "e4": (["order_is_priced"], ["no_rescued_data"]),
        "e5": (["file_rejected"], []),
    }


def test_silver_output_has_the_silver_and_quarantine_columns(bronze: DataFrame) -> None:
    out = _spec(SILVER.name).transform(bronze)
    assert _shape(out.schema, SILVER.schema.names) == _shape(SILVER.schema)
    # The sink names `_reasons` `reasons` in the quarantine table and renders the landed record as text.
    rows = _spec(SILVER.name).sink.quarantine_rows(out)
    assert _shape(rows.schema, QUARANTINE.schema.names) == _shape(QUARANTINE.schema)
    assert {"_reasons", "_warnings"} <= set(out.columns)


# --- gold: daily revenue -----------------------------------------------------------------------------------

SILVER_COLUMNS = (
    "event_id string, event_type string, event_time string, category string, quantity int, amount string, "
    "currency string, event_date string"
)


def _silver(spark: SparkSession, rows: list[tuple]) -> DataFrame:
    return _typed(spark.createDataFrame(rows, SILVER_COLUMNS), SILVER.schema)


@pytest.fixture
def silver(spark: SparkSession) -> DataFrame:
    day1, day2, day3 = "2026-01-01", "2026-01-02", "2026-01-03"
    return _silver(
        spark,
        [
            ("o1", "order", T + "10:00:00", "shoes", 2, "10.00", "USD", day1),
            ("o2", "order", T + "11:00:00", "shoes", 1, "5.50", "USD", day1),
            ("o3", "order", T + "12:00:00", "shoes", 3, "7.00", "EUR", day1),
            ("o4", "order", T + "13:00:00", None, 1, "1.25", "USD", day1),
            ("v1", "page_view", T + "14:00:00", "shoes", None, None, None, day1),
            ("o5", "order", "2026-01-02 09:00:00", "hats", 4, "40.00", "GBP", day2),
            ("v2", "cart_add", "2026-01-03 09:00:00", "hats", 1, None, None, day3),
        ],
    )


def test_daily_revenue_is_recomputed_for_the_days_with_orders(silver: DataFrame) -> None:
    sink = _spec(DAILY_REVENUE.name).sink
    assert _rows(sink.affected(silver).distinct()) == [(date(2026, 1, 1),), (date(2026, 1, 2),)]


class _Frames:
    """Resolves a table name to a DataFrame: the `read` part of a table format, for `recompute`."""

    def __init__(self, frames: dict[str, DataFrame]) -> None:
        self.frames = frames

    def read(self, spark: SparkSession, name: str) -> DataFrame:
        return self.frames[name]


def test_daily_revenue_recompute_sums_orders_of_the_touched_days_only(spark: SparkSession, silver: DataFrame) -> None:
    sink = _spec(DAILY_REVENUE.name).sink
    out = sink.recompute(spark, _Frames({SILVER.name: silver}), [{"event_date": date(2026, 1, 1)}])
    assert _shape(out.schema) == _shape(DAILY_REVENUE.schema)
    assert _rows(out) == [
        (date(2026, 1, 1), "shoes", "EUR", 1, 3, Decimal("7.00")),
        (date(2026, 1, 1), "shoes", "USD", 2, 3, Decimal("15.50")),
        (date(2026, 1, 1), None, "USD", 1, 1, Decimal("1.25")),
    ]


def test_daily_revenue_spec_reads_silver_rows_unchanged(silver: DataFrame) -> None:
    out = _spec(DAILY_REVENUE.name).transform(silver)
    assert _rows(out) == _rows(silver)


# --- gold: event counts ------------------------------------------------------------------------------------


def test_event_counts_per_type_in_five_minute_windows(spark: SparkSession) -> None:
    events = _silver(
        spark,
        [
            ("a", "page_view", T + "10:00:00", None, None, None, None, None),
            ("b", "page_view", T + "10:04:59", None, None, None, None, None),
            ("c", "order", T + "10:04:00", None, None, None, None, None),
            ("d", "page_view", T + "10:05:00", None, None, None, None, None),
            ("e", "cart_add", T + "10:17:30", None, None, None, None, None),
        ],
    )
    out = _spec(EVENT_COUNTS.name).transform(events)
    assert _shape(out.schema) == _shape(EVENT_COUNTS.schema)
    assert _rows(out) == [
        (T + "10:00:00", T + "10:05:00", "order", 1),
        (T + "10:00:00", T + "10:05:00", "page_view", 2),
        (T + "10:05:00", T + "10:10:00", "page_view", 1),
        (T + "10:15:00", T + "10:20:00", "cart_add", 1),
    ]
