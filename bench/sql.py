"""Latency of five typical analyst queries over gold: `tributary sql` (a new process each time) and the SQL server.

`bench_sql(settings)` needs the demo tables in `settings` (it builds a small set with the real pipeline if
gold.daily_revenue is missing). Local numbers include process start, as an analyst at a terminal sees them.
The local command keeps a Parquet copy of each snapshot it has scanned (`<home>/sql-cache`): the first query
after a new commit pays for the pyiceberg scan (`local_cold_s`), later ones do not (`local_p50_s`).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from infra.ports import free_port
from infra.settings import Settings

LOCAL_TARGET_P50_S = 0.5

QUERIES = {
    "revenue_by_day": "SELECT event_date, sum(orders) AS orders, sum(revenue) AS revenue "
    "FROM gold.daily_revenue GROUP BY event_date ORDER BY event_date",
    "top_categories_usd": "SELECT category, sum(revenue) AS revenue FROM gold.daily_revenue "
    "WHERE currency = 'USD' GROUP BY category ORDER BY revenue DESC LIMIT 5",
    "orders_vs_events": "SELECT r.event_date, r.orders, c.order_events "
    "FROM (SELECT event_date, sum(orders) AS orders FROM gold.daily_revenue GROUP BY event_date) r "
    "JOIN (SELECT CAST(window_start AS DATE) AS event_date, sum(events) AS order_events FROM gold.event_counts_5m "
    "WHERE event_type = 'order' GROUP BY CAST(window_start AS DATE)) c ON r.event_date = c.event_date "
    "ORDER BY r.event_date",
    "busiest_windows": "SELECT window_start, sum(events) AS events FROM gold.event_counts_5m "
    "GROUP BY window_start ORDER BY events DESC, window_start LIMIT 10",
    "hourly_orders": "SELECT date_trunc('hour', window_start) AS hour, sum(events) AS orders "
    "FROM gold.event_counts_5m WHERE event_type = 'order' GROUP BY date_trunc('hour', window_start) ORDER BY 1",
}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))  # nearest rank
    return round(ordered[index], 4)


def _ensure_demo_tables(settings: Settings) -> None:
    from infra.errors import ConfigError
    from infra.sql.local import CatalogReader

    try:
        if "gold.daily_revenue" in CatalogReader(settings).tables():
            return
    except ConfigError:  # no catalog database yet
        pass
    from infra.spark import get_spark
    from pipelines.datasets import default_registry
    from pipelines.datasets.ecommerce.sample_data import generate
    from pipelines.run.pipeline import run_pipeline

    if not any((settings.landing / "events").glob("*.json")):
        generate(settings.landing, rows=20_000, files=4, seed=7)
    run_pipeline(get_spark(settings), settings, default_registry())


def _local_command() -> list[str]:
    script = Path(sys.executable).parent / "tributary"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "orchestration.cli.main"]


def _run_local(command: list[str], env: dict[str, str], sql: str) -> float:
    started = time.perf_counter()
    proc = subprocess.run([*command, "sql", "--format", "csv", sql], env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"tributary sql failed on {sql!r}: {proc.stderr.strip()}")
    return elapsed


def bench_sql(settings: Settings, runs: int = 10) -> dict:
    """p50/p95 seconds of five gold queries via the local command (process start included) and the SQL server."""
    from pyhive import hive

    from infra.sql import server as sql_server
    from infra.sql.local import settings_env

    _ensure_demo_tables(settings)
    env = {**os.environ, **settings_env(settings)}
    command = _local_command()
    result: dict[str, float | int | bool] = {"queries": len(QUERIES), "runs_per_query": runs}

    # Cold: an empty snapshot cache, as right after a pipeline commit.
    shutil.rmtree(settings.home / "sql-cache", ignore_errors=True)
    cold = [_run_local(command, env, sql) for sql in QUERIES.values()]
    result["local_cold_s"] = round(max(cold), 4)
    started = time.perf_counter()
    subprocess.run([*command, "--help"], env=env, capture_output=True, check=True)
    result["local_cli_start_s"] = round(time.perf_counter() - started, 4)

    local: list[float] = []
    for name, sql in QUERIES.items():
        times = [_run_local(command, env, sql) for _ in range(runs)]
        result[f"local_p50_s_{name}"] = _percentile(times, 50)
        local += times
    result["local_p50_s"] = _percentile(local, 50)
    result["local_p95_s"] = _percentile(local, 95)
    result["local_target_p50_s"] = LOCAL_TARGET_P50_S
    result["local_target_met"] = result["local_p50_s"] < LOCAL_TARGET_P50_S

    port = free_port()
    started = time.perf_counter()
    sql_server.start(settings, port=port)
    result["server_start_s"] = round(time.perf_counter() - started, 2)
    try:
        password = sql_server.sql_password()  # the server requires it when TRIBUTARY_SQL_PASSWORD is set
        auth = {"auth": "CUSTOM", "password": password} if password else {}
        conn = hive.connect(sql_server.HOST, port, username="bench", database=sql_server.DEFAULT_DATABASE, **auth)
        cursor = conn.cursor()
        served: list[float] = []
        for name, sql in QUERIES.items():
            cursor.execute(sql)  # warm-up: the first query of a session plans and loads metadata
            cursor.fetchall()
            times = []
            for _ in range(runs):
                started = time.perf_counter()
                cursor.execute(sql)
                cursor.fetchall()
                times.append(time.perf_counter() - started)
            result[f"server_p50_s_{name}"] = _percentile(times, 50)
            served += times
        conn.close()
    finally:
        sql_server.stop(settings)
    result["server_p50_s"] = _percentile(served, 50)
    result["server_p95_s"] = _percentile(served, 95)
    result["server_mean_s"] = round(statistics.fmean(served), 4)
    return result
