"""Unit tests of tables' functions (`tb.test`, `tributary test`): the demo datasets' pass, a wrong expectation
prints the rows that differ, and bad test rows are named."""

from __future__ import annotations

import os
import subprocess
import textwrap
from dataclasses import replace

import pytest

from infra.errors import ConfigError
from pipelines.authoring import unit_tests
from pipelines.authoring.unit_tests import UnitTest, run_test
from pipelines.datasets import default_registry, packages_under
from tests.support.jvm import short_lived
from tests.support.repo import TRIBUTARY


@pytest.fixture(scope="module")
def registry():
    return default_registry()


def _demo_tests() -> list[UnitTest]:
    return unit_tests.tests_of(packages_under("pipelines.datasets"))  # (not imported: pytest would collect it)


def test_the_demo_datasets_tests_pass(spark, registry):
    # Another dataset loaded in the same process declares a table of the same name: each test runs its own.
    other = "import pipelines.authoring as tb\n\n@tb.silver\ndef events(bronze_events):\n    return bronze_events\n"
    exec(compile(other, "other_dataset/tables.py", "exec"), {"__name__": "other_dataset.tables"})
    tests = _demo_tests()
    assert len(tests) >= 5 and len({t.table for t in tests}) >= 5
    outcomes = [run_test(spark, t, registry) for t in tests]
    assert [(o.test.name, o.lines) for o in outcomes if not o.passed] == []


def _by_name(part: str) -> UnitTest:
    return next(t for t in _demo_tests() if part in t.name)


def test_a_wrong_expectation_names_the_rows_that_differ(spark, registry):
    right = _by_name("per category")
    wrong = replace(right, expect=({"category": "books", "clicks": 3, "total_ms_to_click": 4000}, *right.expect[1:]))
    outcome = run_test(spark, wrong, registry)
    assert not outcome.passed
    assert outcome.lines == (
        '  returned: unexpected {"category": "books", "clicks": 2, "total_ms_to_click": 4000}',
        '  returned: missing    {"category": "books", "clicks": 3, "total_ms_to_click": 4000}',
    )
    quarantine = _by_name("quarantined by name")
    # A rule's name left out of a quarantined row's reasons is a difference too.
    reasons = ({"event_id": "e4", "reasons": []}, *quarantine.quarantined[1:])
    lines = run_test(spark, replace(quarantine, quarantined=reasons), registry).lines
    assert lines == (
        '  quarantined: unexpected {"event_id": "e4", "reasons": ["order_is_priced"]}',
        '  quarantined: missing    {"event_id": "e4", "reasons": []}',
    )


def test_bad_test_rows_are_refused_by_name(spark, registry):
    right = _by_name("per category")
    given = dict(right.given)
    typo = replace(right, given=(("gold.ad_clicks", ({"categroy": "books"},)),))
    with pytest.raises(ConfigError, match=r"given\['gold.ad_clicks'\], row 1: no column categroy \(columns: click_id"):
        run_test(spark, typo, registry)
    other = replace(right, given=(*right.given, ("silver.events", ())))
    with pytest.raises(ConfigError, match=r"gold\.clicks_by_category does not read silver\.events"):
        run_test(spark, other, registry)
    bad = replace(right, given=(("gold.ad_clicks", ({**given["gold.ad_clicks"][0], "ms_to_click": "soon"},)),))
    with pytest.raises(ConfigError, match=r"given\['gold.ad_clicks'\], row 1: ms_to_click = 'soon' is not a bigint$"):
        run_test(spark, bad, registry)
    unknown = replace(right, expect=({"categories": "books"},))
    with pytest.raises(ConfigError, match="returned rows name categories, not returned"):
        run_test(spark, unknown, registry)
    landed = replace(
        right,
        table="silver.products",
        given=(("silver.products", ({"product_id": "p1", "updated_at": "2026-11-01 00:00:00"},)),),
    )
    assert run_test(spark, replace(landed, expect=()), registry).lines[0].startswith("  returned: unexpected")
    rounded = replace(landed, given=(("silver.products", ({"product_id": "p1", "price": "1.234"},)),))
    with pytest.raises(ConfigError, match=r"row 1: price = '1\.234' is not a decimal\(10,2\)$"):
        run_test(spark, rounded, registry)


TABLES = """
import pipelines.authoring as tb
from pyspark.sql import functions as F

tb.landing("bronze.orders", tb.files("orders", "csv", tb.schema("order_id string, amount decimal(10,2)")))


@tb.gold
def big_orders(bronze_orders):
    return bronze_orders.filter(F.col("amount") >= 100).select("order_id", "amount")


tb.test("gold.big_orders", name="keeps big orders", given={"bronze.orders": [
    {"order_id": "a", "amount": "100.00"}, {"order_id": "b", "amount": "99.99"}]}, expect=[{"order_id": "a"}])
tb.test("gold.big_orders", name="expects too much", given={"bronze.orders": [{"order_id": "c", "amount": "5"}]},
        expect=[{"order_id": "c", "amount": "5.00"}])
"""


def test_the_command_runs_a_datasets_tests_and_exits_1_on_a_failure(tmp_path):
    package = tmp_path / "shop"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tables.py").write_text(textwrap.dedent(TABLES).lstrip())
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUTARY_")}
    env |= {"TRIBUTARY_HOME": str(tmp_path / "home"), "TRIBUTARY_DATASETS": "shop", "PYTHONPATH": str(tmp_path)}
    env = short_lived(env)
    done = subprocess.run([TRIBUTARY, "test"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "ok   gold.big_orders: keeps big orders",
        "FAIL gold.big_orders: expects too much",
        '  returned: missing    {"order_id": "c", "amount": "5.00"}',
        "1 passed, 1 failed",
    ], done.stdout
    one = subprocess.run(
        [TRIBUTARY, "test", "gold.nope"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    assert one.returncode == 2 and one.stderr.strip().splitlines() == [
        "tributary: error: no table gold.nope is declared; `tributary tables` lists them"
    ], one.stderr
