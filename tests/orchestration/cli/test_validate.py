"""`tributary validate` and Dagster's definition loading: every problem of every dataset, one line each naming
the file and line, exit 1, no traceback, and nothing written (the home is not even created)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

BIN = Path(sys.executable).parent

TABLES = """
import pipelines.authoring as tb
from pyspark.sql import functions as F

tb.landing("bronze.orders", tb.files("orders", "csv", tb.schema("order_id string, amount decimal(10,2), at timestamp")))


@tb.silver(write=tb.dedupe("order_id", time="at"))
def orders(bronze_orders):
    return bronze_orders


@tb.gold(watermark=tb.watermark("when", "10 minutes"))
def windows(silver_orders):
    return silver_orders.groupBy(F.window("at", "5 minutes")).count()


@tb.gold(watermark=tb.watermark("at", "10 minutes"))
def per_order(silver_orders):
    return silver_orders.groupBy("order_id").count()


@tb.gold
def refunds(silver_refunds):
    return silver_refunds


@tb.gold
def behind_windows(gold_windows):
    return gold_windows
"""
GOOD_TABLES = TABLES.split("@tb.gold", 1)[0]
GOOD_SQL = "-- keys: day\n-- refresh: recompute by day\nSELECT to_date(at) AS day, sum(amount) AS total\n"
GOOD_SQL += "FROM silver.orders GROUP BY day\n"
BROKEN_SQL = GOOD_SQL.replace("GROUP BY day", "GROUP BY day HAVING")


def _project(root: Path, tables: str, sql: str, extra: dict[str, str]) -> None:
    package = root / "shop"
    package.mkdir(parents=True, exist_ok=True)
    for name, text in {"__init__.py": "", "tables.py": tables, "totals.sql": sql, **extra}.items():
        (package / name).write_text(textwrap.dedent(text).lstrip())


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUTARY_")}
    return {**env, "TRIBUTARY_HOME": str(root / "home"), "TRIBUTARY_DATASETS": "shop", "PYTHONPATH": str(root)}


def _validate(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "tributary"), "validate"], capture_output=True, text=True, env=_env(root), cwd=root, timeout=300
    )


def test_validate_names_every_problem_and_writes_nothing(tmp_path):
    broken = {
        "typo.py": "import pipelines.authoring as tb\n\n@tb.gold\ndef x(silver_orders)\n    return 1\n",
        "boom.py": "RATE = undefined_rate * 2\n",
    }
    _project(tmp_path, TABLES, BROKEN_SQL, broken)
    done = _validate(tmp_path)
    out = done.stdout
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in out + done.stderr
    lines = out.splitlines()
    expected = [
        ("shop/boom.py:1: NameError: name 'undefined_rate' is not defined", "fix the module"),
        ("shop/typo.py:4: SyntaxError", "fix the module"),
        ("shop/totals.sql:4: table 'gold.totals': SQL syntax error", "fix the SELECT"),
        ("shop/tables.py:12, function windows: table 'gold.windows': the watermark column 'when'", "watermark on one"),
        ("shop/tables.py:17, function per_order: table 'gold.per_order': the query groups", "tb.recompute(by="),
        ("shop/tables.py:22, function refunds: table 'gold.refunds': parameter 'silver_refunds' reads", "declare it"),
    ]
    for start, fix in expected:
        line = next((x for x in lines if x.startswith(start)), None)
        assert line is not None and fix in line, f"{start!r} not in:\n{out}"
    assert "bronze.events" not in out  # a project's own datasets only: the demo's tables do not exist
    assert lines[-1] == "FAILED: 2 tables planned, 6 problems, 1 not checked (they read a table with a problem)"
    assert not (tmp_path / "home").exists()

    for name in broken:
        (tmp_path / "shop" / name).unlink()
    _project(tmp_path, GOOD_TABLES, GOOD_SQL, {})
    done = _validate(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "ok: 3 tables planned, 0 problems", done.stdout
    assert not (tmp_path / "home").exists()

    # The project is the user's: `tributary tables` lists its tables only, none of the demo's.
    listed = subprocess.run(
        [str(BIN / "tributary"), "tables", "--format", "json"], capture_output=True, text=True, env=_env(tmp_path)
    )
    assert listed.returncode == 0, listed.stderr
    rows = {row["table"]: row for row in json.loads(listed.stdout)}
    assert set(rows) == {
        "bronze.orders",
        "bronze.orders_files",
        "silver.orders",
        "silver.orders_quarantine",
        "gold.totals",
    }
    assert rows["bronze.orders"]["reads"] == "landed files orders/"
    assert rows["gold.totals"]["write"] == "recompute by key" and rows["gold.totals"]["age"] == "never run"


def test_dagster_definitions_show_the_same_lines_without_our_stack(tmp_path):
    _project(tmp_path, TABLES, GOOD_SQL, {})
    env = {**_env(tmp_path), "DAGSTER_HOME": str(tmp_path / "dagster")}
    (tmp_path / "dagster").mkdir()
    repo = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [str(BIN / "dagster"), "definitions", "validate", "-m", "orchestration.definitions"],
        capture_output=True,
        text=True,
        env=env,
        cwd=repo,
        timeout=300,
    )
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "3 problems in the datasets (one per line):" in out
    for start in (
        "shop/tables.py:12, function windows",
        "shop/tables.py:17, function per_order",
        "shop/tables.py:22, function refunds",
    ):
        assert any(start in line for line in out.splitlines()), out
    assert "pipelines/authoring" not in out and "pipelines/datasets" not in out  # no frame of the loading code


CHANGING_TABLES = """
import pipelines.authoring as tb
from pyspark.sql import functions as F

CHANGE = tb.schema("id BIGINT, tier STRING, op STRING, seq BIGINT, changed_at TIMESTAMP")
APPLY = tb.cdc("id", sequence="seq", values=("tier",))
tb.landing("silver.customers", tb.files("changes", "json", CHANGE), write=APPLY)


@tb.gold
def customer_log(silver_customers):
    return silver_customers


@tb.gold(watermark=tb.watermark("updated_at", "1 hour"), write=tb.upsert("window", "tier"))
def tiers_hourly(silver_customers):
    return silver_customers.groupBy(F.window("updated_at", "1 hour"), "tier").count()


@tb.gold(write=tb.replace())
def tiers(silver_customers):
    return silver_customers.groupBy("tier").count()
"""


def test_validate_names_a_table_streaming_a_changing_table_with_the_fix(tmp_path):
    """An append table, or a watermarked window, streaming a CDC table would keep rows the CDC table has updated
    or deleted since: refused naming both tables and the fix; a replace reader, which follows the changes, is
    planned."""
    _project(tmp_path, CHANGING_TABLES, GOOD_SQL.replace("silver.orders", "silver.customers"), {})
    (tmp_path / "shop" / "totals.sql").unlink()
    done = _validate(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    written = "silver.customers (written by cdc, which updates and deletes rows)"
    whole = "read silver.customers whole (parameter = tb.static)"
    assert done.stdout.splitlines()[:2] == [
        f"shop/tables.py:9, function customer_log: table 'gold.customer_log': streams {written}, but an append "
        "table only adds rows: it would keep every row silver.customers has since changed or deleted; "
        f"{whole}, or declare write=tb.recompute(by=..., keys=...), tb.replace() or tb.upsert(...)",
        f"shop/tables.py:14, function tiers_hourly: table 'gold.tiers_hourly': streams {written} through a "
        "watermark: a window or join row Spark has emitted is final and cannot take a changed row back; "
        f"{whole}, or drop the watermark and declare write=tb.recompute(by=...) or tb.replace()",
    ], done.stdout
    assert done.stdout.splitlines()[-1] == "FAILED: 2 tables planned, 2 problems", done.stdout
