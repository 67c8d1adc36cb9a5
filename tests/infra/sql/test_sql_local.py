"""The analysts' local SQL command: DuckDB over pyiceberg scans, checked against Spark on the same tables."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from infra.errors import TributaryError
from infra.settings import Settings
from infra.spark import get_spark
from infra.sql.catalog import history
from infra.sql.local import (
    LocalEngine,
    QueryRefused,
    UnknownTable,
    check_read_only,
    referenced_tables,
    settings_env,
)
from infra.sql.query import run_query
from infra.sql.spark_engine import check_spark_read_only, spark_query
from orchestration.cli.main import main
from orchestration.cli.sql import _completer, interactive
from pipelines.datasets import default_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io.formats import table_format
from pipelines.run.pipeline import run_pipeline
from tests.support.homes import make_settings

GOLD = "gold.daily_revenue"

# Aggregates, joins (gold-gold and silver-gold), filters on dates and timestamps, top-N.
PARITY_QUERIES = {
    "aggregate": """
        SELECT category, currency, sum(orders) AS orders, sum(units) AS units, sum(revenue) AS revenue
        FROM gold.daily_revenue GROUP BY category, currency ORDER BY category, currency""",
    "date_filter": """
        SELECT event_date, count(*) AS n, sum(revenue) AS revenue, max(revenue) AS best
        FROM gold.daily_revenue
        WHERE event_date >= DATE '2026-11-02' AND event_date < DATE '2026-11-04'
        GROUP BY event_date ORDER BY event_date""",
    "join_gold_gold": """
        SELECT r.event_date, r.orders, c.order_events
        FROM (SELECT event_date, sum(orders) AS orders FROM gold.daily_revenue GROUP BY event_date) r
        JOIN (SELECT CAST(window_start AS DATE) AS event_date, sum(events) AS order_events
              FROM gold.event_counts_5m WHERE event_type = 'order' GROUP BY CAST(window_start AS DATE)) c
          ON r.event_date = c.event_date
        ORDER BY r.event_date""",
    "join_silver_gold": """
        SELECT g.category, g.orders, s.n
        FROM (SELECT category, sum(orders) AS orders FROM gold.daily_revenue GROUP BY category) g
        JOIN (SELECT category, count(*) AS n FROM silver.events WHERE event_type = 'order' GROUP BY category) s
          ON g.category = s.category
        ORDER BY g.category""",
    "timestamp_filter": """
        SELECT event_type, count(*) AS windows, sum(events) AS events, min(window_start) AS first_window
        FROM gold.event_counts_5m
        WHERE window_start >= TIMESTAMP '2026-11-01 12:00:00' AND window_end <= TIMESTAMP '2026-11-03 00:00:00'
        GROUP BY event_type ORDER BY event_type""",
    "top_n": """
        SELECT event_date, category, currency, revenue FROM gold.daily_revenue
        ORDER BY revenue DESC, event_date, category, currency LIMIT 5""",
}


class Lake:
    """A home with the demo tables after two pipeline runs, and what gold looked like after the first."""

    def __init__(self, settings: Settings, first_snapshot: int, first_committed_ms: int, first_rows: list[tuple]):
        self.settings = settings
        self.first_snapshot = first_snapshot
        self.first_committed_ms = first_committed_ms
        self.first_rows = first_rows


def _gold_rows(spark, settings: Settings, suffix: str = "") -> list[tuple]:
    name = table_format(settings).qualified(GOLD)
    return [
        tuple(r) for r in spark.sql(f"SELECT * FROM {name} {suffix} ORDER BY event_date, category, currency").collect()
    ]


def _current_snapshot(spark, settings: Settings) -> tuple[int, int]:
    name = table_format(settings).qualified(GOLD)
    row = spark.sql(
        f"SELECT snapshot_id, committed_at FROM {name}.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).first()
    return row.snapshot_id, int(row.committed_at.replace(tzinfo=None).astimezone(UTC).timestamp() * 1000)


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory) -> Lake:
    settings = make_settings(tmp_path_factory.mktemp("sql-local"))
    assert get_spark(settings) is spark
    generate(settings.landing, rows=1500, files=2, seed=11)
    run_pipeline(spark, settings, default_registry())
    first_snapshot, first_ms = _current_snapshot(spark, settings)
    first_rows = _gold_rows(spark, settings)
    # Warm the local cache on the first snapshot: later queries must not serve it as "current".
    warm = LocalEngine(settings).query("SELECT count(*) FROM gold.daily_revenue")
    assert warm.rows == [(len(first_rows),)]
    generate(settings.landing, rows=1500, files=2, seed=12)
    run_pipeline(spark, settings, default_registry())
    assert _current_snapshot(spark, settings)[0] != first_snapshot
    return Lake(settings, first_snapshot, first_ms, first_rows)


@pytest.mark.parametrize("name", sorted(PARITY_QUERIES))
def test_local_returns_what_spark_returns(lake: Lake, name: str):
    sql = PARITY_QUERIES[name]
    local = run_query(lake.settings, sql)
    spark_rows = spark_query(lake.settings, sql).rows
    assert local.rows, f"{name}: no rows, the comparison would prove nothing"
    assert local.rows == spark_rows
    if name == "join_silver_gold":  # gold's orders per category are exactly silver's order events
        assert all(orders == n for _, orders, n in local.rows)


def test_cli_answers_without_spark(lake: Lake):
    """The command as analysts run it: a new process, JSON out, and pyspark never imported."""
    sql = (
        "SELECT event_date, sum(orders) AS orders, sum(revenue) AS revenue "
        "FROM gold.daily_revenue GROUP BY 1 ORDER BY 1"
    )
    code = (
        "import sys; from orchestration.cli.main import main; rc = main(['sql', '--format', 'json', sys.argv[1]]); "
        "print('PYSPARK_LOADED', 'pyspark' in sys.modules, file=sys.stderr); sys.exit(rc)"
    )
    env = {**os.environ, **settings_env(lake.settings)}
    proc = subprocess.run([sys.executable, "-c", code, sql], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "PYSPARK_LOADED False" in proc.stderr
    got = json.loads(proc.stdout, parse_float=Decimal)  # decimals are written exactly
    expected = spark_query(lake.settings, sql).rows
    assert [(r["event_date"], r["orders"], r["revenue"]) for r in got] == [
        (d.isoformat(), o, rev) for d, o, rev in expected
    ]


@pytest.mark.parametrize(
    "statement",
    [
        "DROP TABLE gold.daily_revenue",
        "DELETE FROM gold.daily_revenue",
        "INSERT INTO gold.daily_revenue SELECT * FROM gold.daily_revenue",
        "UPDATE gold.daily_revenue SET orders = 0",
        "CREATE TABLE gold.x AS SELECT 1 AS a",
        "ALTER TABLE gold.daily_revenue ADD COLUMN y INT",
        "CALL pragma_version()",
        "SET threads = 1",
        "ATTACH '/tmp/other.duckdb' AS other",
        "COPY (SELECT 1) TO '/tmp/out.csv'",
        "PRAGMA version",
        "INSTALL httpfs",
        "LOAD httpfs",
        "EXPORT DATABASE '/tmp/dump'",
        "SELECT 1; DROP TABLE gold.daily_revenue",
    ],
)
def test_local_refuses_everything_but_queries(statement: str):
    with pytest.raises(QueryRefused, match=r"read-only|one statement"):
        check_read_only(statement)


def test_queries_pass_the_guard():
    for sql in ("SELECT 1", "WITH a AS (SELECT 1 AS x) SELECT * FROM a", "VALUES (1)", "FROM gold.daily_revenue"):
        check_read_only(sql)


def test_refused_and_unknown_tables_through_the_command(lake: Lake, capsys, monkeypatch):
    for key, value in settings_env(lake.settings).items():
        monkeypatch.setenv(key, value)
    assert main(["sql", "DELETE FROM gold.daily_revenue"]) == 2
    assert "DELETE statements are refused" in capsys.readouterr().err
    assert main(["sql", "SELECT * FROM gold.daily_revnue"]) == 2
    err = capsys.readouterr().err
    assert "table gold.daily_revnue does not exist" in err
    for table in ("gold.daily_revenue", "gold.event_counts_5m", "silver.events", "bronze.events"):
        assert table in err
    with pytest.raises(UnknownTable, match="qualify tables"):
        run_query(lake.settings, "SELECT * FROM daily_revenue")
    with pytest.raises(UnknownTable, match=r"table gold\.nope does not exist; tables: .*\bgold\.daily_revenue\b"):
        history(lake.settings, "gold.nope")
    # the local engine cannot read anything but the lakehouse tables
    with pytest.raises(TributaryError, match="disabled by configuration"):
        run_query(lake.settings, "SELECT * FROM read_csv('/etc/hostname')")


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO gold.daily_revenue SELECT * FROM gold.daily_revenue",
        "DELETE FROM gold.daily_revenue WHERE orders > 0",
        "MERGE INTO gold.daily_revenue t USING gold.daily_revenue s ON t.category = s.category "
        "WHEN MATCHED THEN UPDATE SET *",
        "DROP TABLE gold.daily_revenue",
        "CREATE TABLE gold.x (a INT) USING iceberg",
        "ALTER TABLE gold.daily_revenue SET TBLPROPERTIES ('a' = 'b')",
        "CALL system.expire_snapshots(table => 'gold.daily_revenue')",
        "SET spark.sql.shuffle.partitions = 1",
        "CACHE TABLE gold.daily_revenue",
        "EXPLAIN INSERT INTO gold.daily_revenue SELECT * FROM gold.daily_revenue",
        # Spark 4's SQL: run-time SQL text, session variables and SQL scripts
        "EXECUTE IMMEDIATE 'DELETE FROM gold.daily_revenue'",
        "EXECUTE IMMEDIATE 'SELECT 1'",
        "DECLARE VARIABLE v INT DEFAULT 1",
        "SET VARIABLE v = 2",
        "BEGIN DELETE FROM gold.daily_revenue; END",
        "BEGIN SELECT 1; END",
    ],
)
def test_spark_engine_refuses_everything_but_queries(spark, statement: str):
    with pytest.raises(QueryRefused, match="read-only"):
        check_spark_read_only(spark, statement)


def test_spark_guard_lets_queries_through(spark):
    for sql in (
        "SELECT 1",
        "WITH a AS (SELECT 1 AS x) SELECT * FROM a",
        "VALUES (1)",
        "SELECT * FROM gold.daily_revenue FOR VERSION AS OF 1",
        "FROM gold.daily_revenue |> WHERE orders > 0 |> SELECT category",  # Spark 4's pipe syntax reads only
    ):
        check_spark_read_only(spark, sql)


def test_time_travel_returns_the_earlier_snapshot(spark, lake: Lake):
    current = _gold_rows(spark, lake.settings)
    assert current != lake.first_rows, "the second run must have changed gold, else time travel proves nothing"
    everything = "SELECT * FROM gold.daily_revenue ORDER BY event_date, category, currency"
    # local, by snapshot id and by time
    assert run_query(lake.settings, everything, as_of=str(lake.first_snapshot)).rows == lake.first_rows
    at = datetime.fromtimestamp(lake.first_committed_ms / 1000, tz=UTC)
    assert run_query(lake.settings, everything, as_of=at.isoformat()).rows == lake.first_rows
    assert run_query(lake.settings, everything).rows == current
    # Spark SQL, through the same command
    travelled = f"SELECT * FROM gold.daily_revenue FOR VERSION AS OF {lake.first_snapshot} ORDER BY 1, 2, 3"
    assert spark_query(lake.settings, travelled).rows == lake.first_rows
    with pytest.raises(TributaryError, match="no snapshot at or before"):
        run_query(lake.settings, everything, as_of=(at - timedelta(days=1)).isoformat())
    with pytest.raises(TributaryError, match="has no snapshot 12345"):
        run_query(lake.settings, everything, as_of="12345")


def test_history_lists_snapshots_with_counts(spark, lake: Lake):
    result = history(lake.settings, GOLD)
    rows = [dict(zip(result.columns, r, strict=True)) for r in result.rows]
    name = table_format(lake.settings).qualified(GOLD)
    expected = spark.sql(
        f"SELECT snapshot_id, operation, summary['total-records'] AS total FROM {name}.snapshots ORDER BY committed_at"
    ).collect()
    assert [(r["snapshot_id"], r["operation"], r["total_records"]) for r in rows] == [
        (e.snapshot_id, e.operation, int(e.total)) for e in expected
    ]
    first = next(r for r in rows if r["snapshot_id"] == lake.first_snapshot)
    assert first["total_records"] == len(lake.first_rows)
    assert [r["current"] for r in rows][-1] is True and sum(r["current"] for r in rows) == 1
    assert all(r["committed_at"].tzinfo is not None for r in rows)


def test_meta_commands_and_interactive_session(lake: Lake):
    engine = LocalEngine(lake.settings)
    described = engine.query("DESCRIBE gold.daily_revenue")
    assert [r[:2] for r in described.rows] == [
        ("event_date", "date"),
        ("category", "string"),
        ("currency", "string"),
        ("orders", "long"),
        ("units", "long"),
        ("revenue", "decimal(18, 2)"),
    ]
    tables = {r[0]: r[1] for r in engine.query("SHOW TABLES").rows}
    commented = "-- the previous line's comment\nSHOW TABLES IN gold /* gold only */"
    assert engine.query(commented).rows == engine.query("SHOW TABLES IN gold").rows != []
    assert tables["gold.daily_revenue"] == engine.query("SELECT count(*) FROM gold.daily_revenue").rows[0][0]
    stdin = io.StringIO(
        "show tables;\n"
        "SELECT sum(orders) AS total_orders\n  FROM gold.daily_revenue;\n"
        "SELECT * FROM gold.missing;\n"
        "DROP TABLE gold.daily_revenue;\n"
        "SELECT count(*) AS windows FROM gold.event_counts_5m;\n"
        "quit\n"
        "SELECT 'never reached';\n"
    )
    out = io.StringIO()
    assert interactive(engine.query, engine.catalog.tables, lake.settings, "table", stdin=stdin, out=out) == 0
    text = out.getvalue()
    assert "gold.event_counts_5m" in text and "total_orders" in text and "windows" in text
    assert "error: table gold.missing does not exist" in text
    assert "error: DROP statements are refused" in text
    assert "never reached" not in text
    total = engine.query("SELECT sum(orders) FROM gold.daily_revenue").rows[0][0]
    assert f" {total}\n" in text
    complete = _completer(lambda: ["gold.daily_revenue", "gold.event_counts_5m", "silver.events"])
    assert [complete("gold.", i) for i in range(3)] == ["gold.daily_revenue", "gold.event_counts_5m", None]
    assert complete("sil", 0) == "silver.events"
    engine.close()


def test_referenced_tables_ignores_strings_and_comments():
    known = {"gold.daily_revenue", "gold.event_counts_5m", "silver.events", "bronze.events"}
    sql = """
        -- bronze.events is only mentioned here
        SELECT 'silver.events' AS label, r.orders
        FROM "gold"."daily_revenue" r JOIN tributary.gold.event_counts_5m c ON r.event_date = c.window_start
        /* gold.nothing */
    """
    assert referenced_tables(sql, known) == {"gold.daily_revenue", "gold.event_counts_5m"}
    assert referenced_tables("SELECT * FROM GOLD . Daily_Revenue", known) == {"gold.daily_revenue"}


def test_a_catalog_named_like_a_namespace_still_reads_its_tables(tmp_path):
    """A home whose catalog is called `ops` (or `gold`): `ops.run_log` names the table, not the catalog."""
    from dataclasses import replace

    from pipelines.run import run_log

    settings = replace(make_settings(tmp_path), catalog_name="ops")
    run_log.record(settings, "gold.daily_revenue", datetime.now(UTC), error=ValueError("boom"))
    assert run_log.fold(settings) == 1
    engine = LocalEngine(settings)
    try:
        assert engine.query("SELECT table_name, status, error FROM ops.run_log").rows == [
            ("gold.daily_revenue", "failed", "boom")
        ]
    finally:
        engine.close()
