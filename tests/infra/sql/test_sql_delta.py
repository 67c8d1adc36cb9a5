"""SQL on a Delta home: DuckDB over delta-rs answers as it does over the same tables in Iceberg, time travel goes
by version, and Spark SQL (`tributary query`, `tributary sql --engine spark`, the Thrift server) reads the same
tables through delta-spark, read-only for analysts."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

import pytest
from pyhive import hive

from infra.ports import free_port
from infra.spark import get_spark
from infra.sql.catalog import QueryRefused, history
from infra.sql.local import LocalEngine, settings_env
from infra.sql.spark_engine import spark_query
from orchestration.cli.main import main
from pipelines.datasets import default_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io.formats import table_format
from pipelines.run.pipeline import run_pipeline
from tests.infra.sql.test_sql_local import GOLD, PARITY_QUERIES
from tests.support.homes import make_settings
from tests.support.jvm import short_lived


@pytest.fixture(scope="module")
def homes(spark, tmp_path_factory):
    """The same two landings run into an Iceberg home and a Delta home; gold's rows after the first run."""
    iceberg = make_settings(tmp_path_factory.mktemp("sql-iceberg"))
    delta = replace(make_settings(tmp_path_factory.mktemp("sql-delta")), table_format="delta")
    assert get_spark(iceberg) is spark and get_spark(delta) is spark  # registers each home's catalog
    first = {}
    for seed in (11, 12):
        for s in (iceberg, delta):
            generate(s.landing, rows=1500, files=2, seed=seed)
            run_pipeline(spark, s, default_registry(), ["bronze.events", "silver.events", GOLD, "gold.event_counts_5m"])
        if seed == 11:
            first = {
                "version": table_format(delta).current_snapshot(spark, GOLD).snapshot_id,
                "rows": LocalEngine(delta).query(f"SELECT * FROM {GOLD} ORDER BY ALL").rows,
            }
    return iceberg, delta, first


@pytest.mark.parametrize("name", sorted(PARITY_QUERIES))
def test_delta_answers_as_iceberg_does(homes, name):
    iceberg, delta, _ = homes
    on_delta = LocalEngine(delta).query(PARITY_QUERIES[name]).rows
    assert on_delta, f"{name}: no rows, the comparison would prove nothing"
    assert on_delta == LocalEngine(iceberg).query(PARITY_QUERIES[name]).rows


def test_time_travel_history_and_tables_on_delta(homes):
    _, delta, first = homes
    engine = LocalEngine(delta, as_of=str(first["version"]))
    assert engine.query(f"SELECT * FROM {GOLD} ORDER BY ALL").rows == first["rows"]
    assert LocalEngine(delta).query(f"SELECT * FROM {GOLD} ORDER BY ALL").rows != first["rows"]

    versions = history(delta, "bronze.events")
    ops = [dict(zip(versions.columns, row, strict=True)) for row in versions.rows]
    assert [o["operation"] for o in ops] == ["create", "append", "append"]
    assert [o["snapshot_id"] for o in ops] == [0, 1, 2]
    assert ops[-1]["current"] and ops[-1]["total_records"] == 3000
    assert sum(int(o["added_records"]) for o in ops) == 3000

    tables = dict((row[0], row[1]) for row in LocalEngine(delta).query("SHOW TABLES").rows)
    assert tables["bronze.events"] == 3000 and GOLD in tables
    count = LocalEngine(delta).query(f"SELECT count(*) FROM {GOLD}").rows
    assert spark_query(delta, f"SELECT count(*) FROM {GOLD}").rows == count
    past = spark_query(delta, f"SELECT count(*) FROM {GOLD} VERSION AS OF {first['version']}").rows
    assert past == [(len(first["rows"]),)] != count
    assert spark_query(delta, f"SELECT count(*) FROM delta.{GOLD}").rows == count
    for statement in (f"VACUUM {GOLD}", f"DELETE FROM {GOLD}", f"OPTIMIZE {GOLD}"):
        with pytest.raises(QueryRefused):
            spark_query(delta, statement)
    assert LocalEngine(delta).query(f"SELECT count(*) FROM {GOLD}").rows == count


def test_tributary_query_reads_a_delta_home(homes, capsys, monkeypatch):
    _, delta, _ = homes
    for key, value in settings_env(delta).items():
        monkeypatch.setenv(key, value)
    (count,) = LocalEngine(delta).query(f"SELECT count(*) FROM {GOLD}").rows[0]
    assert main(["query", f"SELECT count(*) AS gold_rows FROM {GOLD}"]) == 0
    out = capsys.readouterr().out
    assert "gold_rows" in out and f"|{count}" in out.replace(" ", "")


@pytest.mark.slow
def test_thrift_server_serves_delta_gold(homes):
    _, delta, first = homes
    (count,) = LocalEngine(delta).query(f"SELECT count(*) FROM {GOLD}").rows[0]
    port = free_port()
    env = short_lived(
        {**os.environ, **settings_env(delta), "TRIBUTARY_SQL_PORT": str(port), "TRIBUTARY_DRIVER_MEMORY": "1g"}
    )

    def cli(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "orchestration.cli.main", *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)

    started = cli("sql-server", "start")
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        conn = hive.connect("127.0.0.1", port, username="analyst", database="gold")
        cursor = conn.cursor()
        cursor.execute("SELECT count(*) FROM gold.daily_revenue")
        assert cursor.fetchall() == [(count,)]
        cursor.execute(f"SELECT count(*) FROM gold.daily_revenue VERSION AS OF {first['version']}")
        assert cursor.fetchall() == [(len(first["rows"]),)]
        cursor.execute("SHOW TABLES IN gold")
        assert "daily_revenue" in {row[1] for row in cursor.fetchall()}
        for verb in ("VACUUM", "DELETE FROM", "DROP TABLE"):
            statement = f"{verb} gold.daily_revenue"
            with pytest.raises(Exception):  # noqa: B017 - pyhive raises its driver's OperationalError
                cursor.execute(statement)
        conn.close()
    finally:
        stopped = cli("sql-server", "stop")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert LocalEngine(delta).query(f"SELECT count(*) FROM {GOLD}").rows == [(count,)]
