"""A team's own CSV dataset, declared in a temporary package in under 60 lines, materialized by Dagster.

bronze (CSV) → silver with two quarantine rules and a dedup key; a reference table (CSV, newest version per
key); a gold aggregate kept exact per day; a gold stream-static join; and a gold SQL table over the join.
Every table is compared with an independent computation in plain Python.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from dagster import AssetKey, DagsterInstance

from orchestration.definitions import build_definitions
from pipelines.datasets import default_registry
from tests.support.helpers import table
from tests.support.packages import write_package

TABLES = '''
"""A shop's orders, landed as CSV, refined and summed per day and per city."""
from pyspark.sql import functions as F

import pipelines.authoring as tb

ORDERS = tb.schema("order_id string, store_id string, amount decimal(10,2), ordered_at timestamp")
STORES = tb.schema("store_id string, city string, updated_at timestamp")
CSV = {"header": "true"}

tb.landing("bronze.orders", tb.files("orders", "csv", ORDERS, options=CSV))


@tb.silver(source=tb.files("stores", "csv", STORES, options=CSV), write=tb.upsert("store_id", version="updated_at"))
def stores(landed):
    """The store list: the newest version of each store."""
    return landed.filter("_corrupt_record IS NULL AND store_id IS NOT NULL").select(*STORES.names)


@tb.silver(write=tb.dedupe("order_id", time="ordered_at"))
@tb.expect_or_quarantine("has_store", "store_id IS NOT NULL", "an order names its store")
@tb.expect_or_quarantine("positive_amount", "amount > 0", "an order has a positive amount")
def orders(bronze_orders):
    """Valid orders, once each."""
    return bronze_orders.withColumn("order_date", F.to_date("ordered_at"))


@tb.gold(write=tb.recompute(by="order_date", keys=("order_date", "store_id")))
def daily_sales(silver_orders):
    """Orders and revenue per day and store, exact per touched day."""
    return silver_orders.groupBy("order_date", "store_id").agg(
        F.count(F.lit(1)).alias("orders"), F.sum("amount").alias("revenue")
    )


@tb.gold(keys="order_id")
def orders_by_city(silver_orders, silver_stores=tb.static):
    """Each order with its store's city (stream-static join)."""
    cities = silver_stores.select("store_id", "city")
    return silver_orders.join(cities, "store_id", "left").select(
        "order_id", "store_id", F.coalesce("city", F.lit("unknown")).alias("city"), "amount"
    )
'''
CITY_TOTALS = """
-- keys: city
-- refresh: replace
-- description: Orders and revenue per city.
SELECT city, count(*) AS orders, sum(amount) AS revenue FROM gold.orders_by_city GROUP BY city
"""
ORDER_FILES = {
    "orders-1.csv": [
        ("o1", "s1", "10.00", "2026-03-01 09:00:00"),
        ("o2", "s2", "5.50", "2026-03-01 10:00:00"),
        ("o3", "", "7.00", "2026-03-01 11:00:00"),  # no store: quarantined
        ("o4", "s1", "-1.00", "2026-03-02 09:00:00"),  # negative: quarantined
    ],
    "orders-2.csv": [
        ("o2", "s2", "5.50", "2026-03-01 10:00:00"),  # sent again: dropped
        ("o5", "s3", "20.00", "2026-03-02 12:00:00"),
        ("o6", "s9", "1.25", "2026-03-02 13:00:00"),  # unknown store: city 'unknown'
    ],
}
STORE_ROWS = [("s1", "Lyon", "2026-01-01 00:00:00"), ("s2", "Oslo", "2026-01-01 00:00:00"),
              ("s1", "Paris", "2026-02-01 00:00:00"), ("s3", "Rome", "2026-01-01 00:00:00")]  # fmt: skip


def _csv(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([",".join(header), *(",".join(r) for r in rows)]) + "\n")


def test_a_dataset_in_sixty_lines_runs_through_dagster(spark, fresh_settings, tmp_path, monkeypatch):
    package = write_package(tmp_path / "src", "shop_datasets", {"tables.py": TABLES, "city_totals.sql": CITY_TOTALS})
    user_lines = [line for line in (TABLES + CITY_TOTALS).splitlines() if line.strip()]
    assert len(user_lines) <= 60
    s = fresh_settings
    for name, rows in ORDER_FILES.items():
        _csv(s.landing / "orders" / name, ("order_id", "store_id", "amount", "ordered_at"), rows)
    _csv(s.landing / "stores" / "stores-1.csv", ("store_id", "city", "updated_at"), STORE_ROWS)
    monkeypatch.setenv("TRIBUTARY_DATASETS", package)
    monkeypatch.setenv("TRIBUTARY_HOME", str(s.home))
    monkeypatch.setenv("TRIBUTARY_CATALOG_NAME", s.catalog_name)

    defs = build_definitions()
    registry = default_registry()
    names = ["bronze.orders", "silver.stores", "silver.orders", "gold.daily_sales", "gold.orders_by_city",
             "gold.city_totals"]  # fmt: skip
    job = defs.resolve_implicit_global_asset_job_def()
    with DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(
            instance=instance,
            asset_selection=[AssetKey(o.name.split(".")) for n in names for o in registry.get(n).outputs()],
        )
    assert result.success
    materialized = {".".join(e.asset_key.path) for e in result.get_asset_materialization_events()}
    assert set(names) <= materialized
    checks = {(".".join(e.asset_key.path), e.check_name): e.passed for e in result.get_asset_check_evaluations()}
    assert checks[("silver.orders", "expectations")] is True

    # The independent computation: valid orders once each, the newest store version, sums per day and city.
    newest = {}
    for store, city, _updated in sorted(STORE_ROWS, key=lambda r: r[2]):
        newest[store] = city
    valid = {}
    for name in sorted(ORDER_FILES):
        for order, store, amount, at in ORDER_FILES[name]:
            if store and Decimal(amount) > 0 and order not in valid:
                valid[order] = (store, Decimal(amount), at[:10])
    daily = defaultdict(lambda: [0, Decimal(0)])
    city = defaultdict(lambda: [0, Decimal(0)])
    for store, amount, day in valid.values():
        daily[(day, store)][0] += 1
        daily[(day, store)][1] += amount
        city[newest.get(store, "unknown")][0] += 1
        city[newest.get(store, "unknown")][1] += amount

    def rows(name, *columns):
        return sorted(tuple(str(v) for v in r) for r in table(spark, s, name).select(*columns).collect())

    assert rows("bronze.orders", "order_id") == sorted((r[0],) for f in ORDER_FILES.values() for r in f)
    assert rows("silver.orders", "order_id", "store_id", "amount") == sorted(
        (o, st, str(a)) for o, (st, a, _) in valid.items()
    )
    quarantined = rows("silver.orders_quarantine", "order_id", "reasons")
    assert quarantined == [("o3", "['has_store']"), ("o4", "['positive_amount']")]
    assert rows("silver.stores", "store_id", "city") == sorted(newest.items())
    assert rows("gold.daily_sales", "order_date", "store_id", "orders", "revenue") == sorted(
        (day, store, str(n), str(total)) for (day, store), (n, total) in daily.items()
    )
    assert rows("gold.orders_by_city", "order_id", "city") == sorted(
        (o, newest.get(st, "unknown")) for o, (st, _, _) in valid.items()
    )
    assert rows("gold.city_totals", "city", "orders", "revenue") == sorted(
        (c, str(n), str(total)) for c, (n, total) in city.items()
    )
