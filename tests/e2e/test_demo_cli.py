"""`tributary demo` (what `make demo` runs) end to end, twice, on each table format: the second run adds nothing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance

from infra.settings import TABLE_FORMATS, Settings
from infra.sql.local import LocalEngine
from orchestration.partitions import daily_partitions
from tests.support.jvm import short_lived
from tests.support.repo import REPO
from tests.test_docs import blocks

TRIBUTARY = str(Path(sys.executable).parent / "tributary")


def _table_rows(stdout: str) -> dict[str, list[str]]:
    rows = {}
    for line in stdout.splitlines():
        parts = line.split()
        if parts and parts[0].count(".") == 1 and parts[0].split(".")[0] in ("bronze", "silver", "gold"):
            rows[parts[0]] = parts[1:]
    return rows


def _analyst_queries_answer(settings: Settings, table_format: str) -> None:
    """Every statement of docs/analysts.md's SQL examples answers on the demo's tables with `tributary sql`'s
    engine (the time-travel block names a snapshot and a time of the page's own home)."""
    engine = LocalEngine(replace(settings, table_format=table_format))
    statements = [
        statement.strip()
        for block in blocks(REPO / "docs" / "analysts.md", "sql")
        if "AS OF" not in block
        for statement in block.split(";")
        if re.sub(r"--[^\n]*", "", statement).strip()
    ]
    assert len(statements) >= 10
    try:
        for statement in statements:
            assert engine.query(statement).rows, statement
    finally:
        engine.close()


@pytest.mark.slow
@pytest.mark.parametrize("table_format", TABLE_FORMATS)
def test_demo_twice_adds_nothing(tmp_path, table_format, monkeypatch):
    env = {
        **short_lived(dict(os.environ)),
        "TRIBUTARY_HOME": str(tmp_path / "home"),
        "DAGSTER_HOME": str(tmp_path / "dagster"),
        "TRIBUTARY_TABLE_FORMAT": table_format,
    }
    args = [TRIBUTARY, "demo", "--rows", "3000", "--files", "3"]
    started = datetime.now(UTC)
    first = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    ended = datetime.now(UTC)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "generated 3000 events" in first.stdout
    assert "Warning" not in first.stderr, first.stderr[-3000:]  # no pandas or pyspark warnings on the terminal
    rows = _table_rows(first.stdout)
    assert set(rows) == {
        "bronze.events",
        "silver.events",
        "silver.events_quarantine",
        "gold.daily_revenue",
        "gold.event_counts_5m",
        # the clickstream dataset (docs/streaming.md)
        "bronze.impressions",
        "bronze.clicks",
        "silver.products",
        "silver.impressions",
        "silver.customers",
        "silver.customers_history",
        "gold.ad_clicks",
        "gold.ad_clicks_late",
        "gold.impressions_10m",
        "gold.impressions_10m_late",
        "gold.impressions_sliding_10m",
        "gold.impressions_sliding_10m_late",
        "gold.user_sessions",
        "gold.user_sessions_late",
        "gold.user_visits",
        "gold.user_visits_late",
        "gold.clicks_by_category",
        # per-file health of every file-source table (docs/landing.md)
        "bronze.events_files",
        "bronze.impressions_files",
        "bronze.clicks_files",
        "silver.products_files",
        "silver.customers_files",
    }
    assert rows["bronze.events"][0] == "3000"  # rows in
    assert rows["bronze.events"][-1] == "3000"  # table rows
    tables_on_disk = {p.parent.name for p in (tmp_path / "home" / "warehouse" / "delta").glob("*/*/_delta_log")}
    assert ("events" in tables_on_disk) == (table_format == "delta")

    settings = Settings.from_env(home=tmp_path / "home")
    _analyst_queries_answer(settings, table_format)
    # Daily partitions start at the first day gold holds, not months before the data.
    engine = LocalEngine(replace(settings, table_format=table_format, partitions_start=None))
    try:
        days = sorted(str(r[0]) for r in engine.query("SELECT DISTINCT event_date FROM gold.daily_revenue").rows)
        (newest,) = engine.query("SELECT max(event_time) FROM silver.events").rows[0]
    finally:
        engine.close()
    newest = newest if newest.tzinfo else newest.replace(tzinfo=UTC)
    assert daily_partitions(replace(settings, partitions_start=None)).get_first_partition_key() == days[0]
    # ... and the demo's run recorded each of them as materialized (its definitions loaded before any data).
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))  # the instance's storage is under $DAGSTER_HOME
    instance = DagsterInstance.from_config(str(tmp_path / "dagster"))
    try:
        materialized = instance.get_materialized_partitions(AssetKey(["gold", "daily_revenue"]))
    finally:
        instance.dispose()
    assert sorted(materialized) == days

    # `tributary tables` reads the same numbers from metadata alone (no Java reachable), every table listed.
    no_java = {**env, "JAVA_HOME": str(tmp_path / "no-java"), "PATH": str(Path(sys.executable).parent)}
    listed = subprocess.run([TRIBUTARY, "tables", "--format", "json"], env=no_java, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr[-2000:]
    described = {row["table"]: row for row in json.loads(listed.stdout)}
    assert set(described) == set(rows)
    assert {name: str(row["rows"] or 0) for name, row in described.items()} == {n: c[-1] for n, c in rows.items()}
    assert described["silver.events"]["write"] == "validate + dedupe"
    assert described["silver.events"]["reads"] == "bronze.events"
    assert described["silver.events_quarantine"]["write"] == "with silver.events"
    assert described["gold.daily_revenue"]["age"] != "never run"
    # The demo's events end at midnight: the freshness check its run made (newest event within a day) passes for
    # about a day after they land, and fails from then on (in the last minutes of the day they landed, too).
    expected = {"fresh"} if ended - newest < timedelta(days=1) else {"stale"}
    if started - newest < timedelta(days=1) <= ended - newest:
        expected = {"fresh", "stale"}  # the day went by while the demo ran
    assert described["silver.events"]["freshness"] in expected

    second = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "already has files: not generating more" in second.stdout
    again = _table_rows(second.stdout)
    for name, cells in again.items():
        assert cells[1] == "0", f"{name} wrote rows on a re-run: {cells}"  # written
        assert cells[-1] == rows[name][-1], f"{name} changed size on a re-run"
    # The runs are recorded in the Dagster instance the UI reads.
    assert any((tmp_path / "dagster").rglob("*.db"))

    # Nothing new: `tributary run` decides that from files and metadata alone and never starts a JVM (with no
    # Java reachable it would fail).
    noop = subprocess.run([TRIBUTARY, "run"], env=no_java, capture_output=True, text=True, timeout=120)
    assert noop.returncode == 0, noop.stdout[-2000:] + noop.stderr[-2000:]
    idle = _table_rows(noop.stdout)
    assert set(idle) == set(rows)
    assert all(cells[1] == "0" and cells[-1] == rows[name][-1] for name, cells in idle.items()), idle

    # The Dagster job too: its definitions load from the schemas cached when they were inferred, every asset
    # skips its query and every check is carried over, so it succeeds with no Java reachable.
    dagster = str(Path(sys.executable).with_name("dagster"))
    job = [dagster, "job", "execute", "-m", "orchestration.definitions", "-j", "tributary_pipeline"]
    idle_job = subprocess.run(job, env=no_java, capture_output=True, text=True, timeout=300)
    log = idle_job.stdout + idle_job.stderr
    assert idle_job.returncode == 0, log[-3000:]
    assert "RUN_SUCCESS" in log and "STEP_FAILURE" not in log, log[-3000:]
    assert log.count("ASSET_CHECK_EVALUATION") >= 20
