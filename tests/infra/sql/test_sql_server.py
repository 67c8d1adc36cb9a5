"""The JDBC/ODBC endpoint: Spark's Thrift Server started by `tributary sql-server`, queried over HiveServer2."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from pyhive import hive

from infra.ports import free_port, port_free
from infra.settings import Settings
from infra.sql.local import settings_env
from infra.sql.query import run_query
from infra.sql.server import read_only_catalog_uri, status
from pipelines.datasets import default_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io.formats import table_format
from pipelines.run.pipeline import run_pipeline
from tests.support.homes import make_settings
from tests.support.jvm import short_lived

GOLD_QUERY = """
    SELECT category, currency, sum(orders) AS orders, sum(units) AS units, sum(revenue) AS revenue
    FROM {table} WHERE event_date >= DATE '2026-11-02'
    GROUP BY category, currency ORDER BY category, currency"""


def _cli(settings: Settings, port: int, *args: str) -> subprocess.CompletedProcess:
    env = short_lived(
        {**os.environ, **settings_env(settings), "TRIBUTARY_SQL_PORT": str(port), "TRIBUTARY_DRIVER_MEMORY": "1g"}
    )
    return subprocess.run(
        [sys.executable, "-m", "orchestration.cli.main", *args], env=env, capture_output=True, text=True, timeout=600
    )


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.mark.slow
def test_thrift_server_serves_gold_read_only(spark, fresh_settings: Settings):
    settings = fresh_settings
    generate(settings.landing, rows=1500, files=2, seed=21)
    run_pipeline(spark, settings, default_registry())
    gold = table_format(settings).qualified("gold.daily_revenue")
    expected = [tuple(r) for r in spark.sql(GOLD_QUERY.format(table=gold)).collect()]
    assert expected
    snapshots_before = spark.sql(f"SELECT snapshot_id FROM {gold}.snapshots").count()
    rows_before = spark.table(gold).count()
    current = spark.sql(f"SELECT snapshot_id FROM {gold}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0]

    port = free_port()
    started = _cli(settings, port, "sql-server", "start")
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert f"jdbc:hive2://127.0.0.1:{port}/gold" in started.stdout
        assert "read-only" in started.stdout and "server.log" in started.stdout
        assert _cli(settings, port, "sql-server", "status").returncode == 0

        conn = hive.connect("127.0.0.1", port, username="analyst", database="gold")
        cursor = conn.cursor()
        cursor.execute(GOLD_QUERY.format(table="gold.daily_revenue"))
        assert cursor.fetchall() == expected  # the same numbers as Spark in this process
        assert run_query(settings, GOLD_QUERY.format(table="gold.daily_revenue")).rows == expected
        cursor.execute(f"SELECT count(*) FROM gold.daily_revenue FOR VERSION AS OF {current}")
        assert cursor.fetchall() == [(rows_before,)]

        # read-only: neither writes nor maintenance procedures get through
        for statement in (
            "INSERT INTO gold.daily_revenue SELECT * FROM gold.daily_revenue",
            "CREATE NAMESPACE scratch",
            "CALL system.expire_snapshots(table => 'gold.daily_revenue')",
        ):
            with pytest.raises(Exception):  # noqa: B017 - pyhive raises its driver's OperationalError
                cursor.execute(statement)
        conn.close()
        assert spark.sql(f"SELECT snapshot_id FROM {gold}.snapshots").count() == snapshots_before
        assert spark.table(gold).count() == rows_before
        namespaces = [r[0] for r in spark.sql(f"SHOW NAMESPACES IN {settings.catalog_name}").collect()]
        assert "scratch" not in namespaces
    finally:
        stopped = _cli(settings, port, "sql-server", "stop")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "stopped" in stopped.stdout
    assert not _listening(port) and port_free(port)
    assert status(settings) is None
    assert _cli(settings, port, "sql-server", "status").returncode == 1


def test_read_only_catalog_uri(tmp_path):
    settings = make_settings(tmp_path)
    uri = read_only_catalog_uri(settings)
    assert uri.startswith(f"jdbc:sqlite:{settings.catalog_db}?")
    assert "open_mode=1" in uri and "journal_mode" not in uri and "busy_timeout=30000" in uri
