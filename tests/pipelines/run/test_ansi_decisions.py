"""Spark 4's ANSI mode, decided per place (docs/tables.md, "Bad values").

- Sessions run tables' functions without ANSI mode: a value the function cannot cast becomes NULL, and the
  table's rule quarantines the row by name (as on Spark 3); nothing stops the run.
- With `spark.sql.ansi.enabled=true` (a user's choice), the same value stops the run with one line naming the
  table and the fix, and nothing of the batch is written.
- Rules never depend on it: a rule that cannot be computed on a row (a bad cast, a division by zero) fails that
  row, even in an ANSI session.
- Landing parses never depend on it: a value that does not parse as its declared type lands in `_rescued_data`.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from infra.errors import PipelineError
from infra.settings import Settings
from infra.spark import ANSI_MODE
from pipelines.authoring.load import load_registry
from pipelines.io.formats import table_format
from pipelines.run.runner import run_table
from pipelines.spec.rules import REASONS_COLUMN, Rule, apply_rules
from tests.support.packages import write_package

DATASET = """
import pipelines.authoring as tb
from pyspark.sql import functions as F

RAW = tb.schema("order_id string, qty string, price int, at timestamp")
tb.landing("bronze.raw_orders", tb.files("raw_orders", "json", RAW))


@tb.silver(write=tb.dedupe("order_id", time="at"))
@tb.expect_or_quarantine("qty_is_a_number", "qty_n IS NOT NULL")
def orders(bronze_raw_orders):
    return bronze_raw_orders.withColumn("qty_n", F.col("qty").cast("int"))
"""
_packages = itertools.count()


@pytest.fixture
def ansi(spark: SparkSession) -> Iterator[None]:
    """The shared session in ANSI mode for one test."""
    spark.conf.set(ANSI_MODE, "true")
    try:
        yield
    finally:
        spark.conf.set(ANSI_MODE, "false")


def _home(settings: Settings, tmp_path) -> list:
    package = write_package(tmp_path / "packages", f"ansi{next(_packages)}", {"tables.py": DATASET})
    folder = settings.landing / "raw_orders"
    folder.mkdir(parents=True)
    at = "2026-01-01T10:00:00"
    lines = [{"order_id": "a", "qty": "2", "price": 5, "at": at}, {"order_id": "b", "qty": "two", "price": 7, "at": at}]
    (folder / "1.json").write_text("".join(json.dumps(line) + "\n" for line in lines))
    registry = load_registry([package])
    return [registry.get("bronze.raw_orders"), registry.get("silver.orders")]


def test_sessions_run_functions_without_ansi_so_a_rule_quarantines_the_bad_value(
    spark: SparkSession, fresh_settings: Settings, tmp_path
) -> None:
    assert spark.conf.get(ANSI_MODE) == "false"
    bronze, silver = _home(fresh_settings, tmp_path)
    run_table(spark, fresh_settings, bronze)
    report = run_table(spark, fresh_settings, silver)
    fmt = table_format(fresh_settings)
    assert [tuple(r) for r in fmt.read(spark, "silver.orders").select("order_id", "qty_n").collect()] == [("a", 2)]
    assert report.metrics["rows_quarantined"] == 1
    quarantined = fmt.read(spark, "silver.orders_quarantine").select("order_id", "reasons").collect()
    assert [(r.order_id, list(r.reasons)) for r in quarantined] == [("b", ["qty_is_a_number"])]


def test_in_an_ansi_session_the_bad_value_stops_the_run_with_one_line_and_nothing_written(
    spark: SparkSession, fresh_settings: Settings, tmp_path, ansi: None
) -> None:
    bronze, silver = _home(fresh_settings, tmp_path)
    run_table(spark, fresh_settings, bronze)  # the landing parse does not depend on ANSI mode
    with pytest.raises(PipelineError) as caught:
        run_table(spark, fresh_settings, silver)
    message = str(caught.value)
    assert message.startswith("table silver.orders: ")
    assert "CAST_INVALID_INPUT" in message and "'two'" in message and "try_cast" in message
    assert "\n" not in message
    assert table_format(fresh_settings).stats(spark, "silver.orders").rows == 0


def test_rules_fail_a_row_they_cannot_compute_even_in_an_ansi_session(spark: SparkSession, ansi: None) -> None:
    rows = spark.createDataFrame([("a", "2"), ("b", "two"), ("c", "0")], "id string, qty string")
    rules = (Rule("qty_positive", "CAST(qty AS INT) > 0"), Rule("ten_per_qty", "10 / CAST(qty AS INT) >= 1"))
    out = apply_rules(rows, rules).select("id", REASONS_COLUMN).orderBy("id").collect()
    assert [(r.id, list(r._reasons)) for r in out] == [
        ("a", []),
        ("b", ["qty_positive", "ten_per_qty"]),
        ("c", ["qty_positive", "ten_per_qty"]),
    ]


def test_landing_parse_rescues_a_value_of_the_wrong_type_in_an_ansi_session(
    spark: SparkSession, fresh_settings: Settings, tmp_path, ansi: None
) -> None:
    bronze, _ = _home(fresh_settings, tmp_path)
    folder = fresh_settings.landing / "raw_orders"
    (folder / "2.json").write_text(
        json.dumps({"order_id": "c", "qty": "1", "price": "seven", "at": "2026-01-01T11:00:00"}) + "\n"
    )
    run_table(spark, fresh_settings, bronze)
    rows = table_format(fresh_settings).read(spark, "bronze.raw_orders").where(F.col("order_id") == "c").collect()
    assert [(r.price, r._rescued_data) for r in rows] == [(None, '{"price":"seven"}')]
