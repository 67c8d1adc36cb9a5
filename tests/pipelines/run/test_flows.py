"""Several flows into one table: each with its own checkpoint and numbers, every row once; a flow declared
`once=True` is read at its first run and never again; adding a flow leaves the others as they are and a full
refresh reads every flow again. (Files and a Kafka topic into one table, and kills between flows:
tests/pipelines/io/test_kafka.py.)"""

from __future__ import annotations

import itertools
import json
from datetime import date

import pytest
from dagster import DagsterInstance, materialize

from infra.errors import ConfigError
from orchestration.assets import build_table_asset
from orchestration.cli.summary import format_numbers
from orchestration.resources import SparkResource
from orchestration.sensors import affected_assets, scan_landing
from pipelines.authoring.declarations import DeclarationError
from pipelines.authoring.load import load_registry
from pipelines.ops.full_refresh import full_refresh
from pipelines.ops.reprocess import reprocess
from pipelines.run.pipeline import run_pipeline
from pipelines.run.summary import report_numbers
from tests.support.helpers import table
from tests.support.packages import write_package

ONE = """
import pipelines.authoring as tb

ORDERS = tb.schema("order_id string, amount int")
tb.landing("bronze.orders", tb.files("orders_eu", "json", ORDERS))
"""
MORE = """
tb.flow("bronze.orders", tb.files("orders_us", "json", ORDERS))
tb.flow("bronze.orders", tb.files("orders_2019", "json", ORDERS), once=True)
"""


def _land(folder, name: str, ids: range) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps({"order_id": f"o{i}", "amount": i}) + "\n" for i in ids))


def _ids(spark, settings) -> list[str]:
    return sorted(r.order_id for r in table(spark, settings, "bronze.orders").select("order_id").collect())


def test_flows_land_every_row_once_and_a_once_flow_is_read_once(spark, fresh_settings, tmp_path):
    settings = fresh_settings
    packages = tmp_path / "packages"
    _land(settings.landing / "orders_eu", "a.json", range(0, 3))
    _land(settings.landing / "orders_us", "a.json", range(10, 14))
    _land(settings.landing / "orders_2019", "a.json", range(100, 102))
    run_pipeline(spark, settings, load_registry([write_package(packages, "one_producer", {"tables.py": ONE})]))
    assert _ids(spark, settings) == ["o0", "o1", "o2"]

    # Flows added to the table: they read their folders from the start, the first flow goes on where it was.
    registry = load_registry([write_package(packages, "three_producers", {"tables.py": ONE + MORE})])
    assert [f.name for f in registry.get("bronze.orders").all_flows()] == ["main", "orders_us", "orders_2019"]
    report = run_pipeline(spark, settings, registry)[0]
    assert _ids(spark, settings) == sorted(f"o{i}" for i in [*range(0, 3), *range(10, 14), *range(100, 102)])
    assert report.rows_in == 6
    assert {name: r.rows_in for name, r in report.flows.items()} == {"main": 0, "orders_us": 4, "orders_2019": 2}
    numbers = report_numbers([report])["bronze.orders"]
    assert (numbers["flow_orders_us_rows_in"], numbers["flow_orders_us_files_read"], numbers["flow_main_skipped"]) == (
        4,
        1,
        True,
    )
    assert "  flow orders_2019" in format_numbers({"bronze.orders": numbers})

    _land(settings.landing / "orders_us", "b.json", range(14, 16))
    _land(settings.landing / "orders_2019", "b.json", range(102, 104))  # a once-flow is never read again
    again = run_pipeline(spark, settings, registry)[0]
    assert again.flows["orders_us"].rows_in == 2 and again.flows["main"].skipped
    assert again.flows["orders_2019"].skipped and "read once" in (again.flows["orders_2019"].note or "")
    assert len(_ids(spark, settings)) == 11
    assert run_pipeline(spark, settings, registry)[0].skipped

    with pytest.raises(ConfigError, match=r"fed by 3 flows .*full-refresh"):
        reprocess(spark, settings, registry, "bronze.orders", date(2026, 1, 1), date(2026, 1, 1))

    # A full refresh reads every flow again, the once-flow's whole folder included.
    full_refresh(spark, settings, registry, "bronze.orders", confirm="bronze.orders")
    assert _ids(spark, settings) == sorted(f"o{i}" for i in [*range(0, 3), *range(10, 16), *range(100, 104)])

    # Dagster records each flow's numbers on the table's asset.
    _land(settings.landing / "orders_us", "c.json", range(16, 19))
    # The landing sensor watches every flow's folder and launches the table for a file in any of them.
    assert any(name.endswith("orders_us/c.json") for name in scan_landing(settings, registry))
    assert [key.path for key in affected_assets(registry, {"orders_us"})][:1] == [["bronze", "orders"]]
    resource = SparkResource(home=str(settings.home), catalog_name=settings.catalog_name)
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [build_table_asset(registry.get("bronze.orders"))], instance=instance, resources={"spark": resource}
        )
        meta = result.asset_materializations_for_node("bronze__orders")[0].metadata
    assert meta["flow_orders_us_rows_in"].value == 3 and meta["flow_main_rows_in"].value == 0
    assert meta["rows_in"].value == 3


_bad = itertools.count()


@pytest.mark.parametrize(
    "more,problem",
    [
        ('tb.flow("bronze.orders", tb.files("orders_eu", "json", ORDERS), name="again")', "in two flows"),
        ('tb.flow("bronze.order", tb.files("orders_us", "json", ORDERS))', "which no dataset declares"),
        ('tb.flow("bronze.orders", tb.files("orders_us", "json", tb.schema("x int")))', "other columns"),
        ('tb.flow("bronze.orders", tb.files("orders_us", "json", ORDERS), name="main")', "two flows are named"),
    ],
)
def test_a_flow_that_cannot_feed_its_table_is_refused_when_the_dataset_loads(tmp_path, more, problem):
    package = write_package(tmp_path, f"bad_flow{next(_bad)}", {"tables.py": ONE + more + "\n"})
    with pytest.raises(DeclarationError, match=problem) as caught:
        load_registry([package])
    assert "tables.py:" in str(caught.value)
