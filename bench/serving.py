"""Serving: how long a gold table takes to reach the home's PostgreSQL, and how fast analysts' queries answer there.

`bench_serving(settings)` builds `gold.serving_bench` (`rows` rows, unique on day, category and currency) with
Spark, starts the home's serving server (`infra.serving.server`) on a free port and times the first sync, an
incremental one after an `UPDATE` of 1 % of the rows, and one with nothing new. Then it times the same aggregate,
warm, through psycopg2 as the analysts' role, through `tributary sql`'s engine in process (DuckDB over the
snapshot), and through the Spark Thrift Server, and checks that the served rows equal the lakehouse's.

PostgreSQL runs as the `postgres` user when we are root: the home and every folder above it must let that user
through (`bench.run` makes its root folder 0o711).
"""

from __future__ import annotations

import secrets
import statistics
import time
from collections.abc import Callable
from datetime import date

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, DecimalType, LongType, StringType, StructField, StructType

from infra.ports import free_port
from infra.settings import Settings

TABLE = "gold.serving_bench"
KEYS = ("day", "category", "currency")
SCHEMA = StructType(
    [
        StructField("day", DateType()),
        StructField("category", StringType()),
        StructField("currency", StringType()),
        StructField("orders", LongType()),
        StructField("revenue", DecimalType(18, 2)),
    ]
)
CURRENCIES = ("USD", "EUR", "GBP", "JPY")
CATEGORIES = 25  # with the 4 currencies, 100 rows a day: one category and currency is exactly 1 % of the rows
FIRST_DAY = date(2020, 1, 1)
# The rows the incremental sync must carry over: every day's cat_00 in USD.
CHANGED = "category = 'cat_00' AND currency = 'USD'"
QUERY = (
    f"SELECT category, currency, sum(orders) AS orders, sum(revenue) AS revenue FROM {TABLE} "
    "GROUP BY 1, 2 ORDER BY 1, 2"
)
ALL_ROWS = f"SELECT day, category, currency, orders, revenue FROM {TABLE}"
WARMUPS, RUNS = 2, 7


def _build_table(spark: SparkSession, settings: Settings, rows: int) -> str:
    """Create (or recreate) the bench table with `rows` rows; its Spark identifier."""
    from pipelines.io.formats import IcebergFormat
    from pipelines.spec.tables import OutputTable

    iceberg = IcebergFormat(settings)
    qualified = iceberg.qualified(TABLE)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {settings.catalog_name}.gold")
    spark.sql(f"DROP TABLE IF EXISTS {qualified} PURGE")
    iceberg.ensure_table(spark, OutputTable(TABLE, SCHEMA))
    per_day = len(CURRENCIES) * CATEGORIES
    currency = F.element_at(F.array(*[F.lit(c) for c in CURRENCIES]), (F.col("id") % len(CURRENCIES) + 1).cast("int"))
    category = F.format_string("cat_%02d", (F.col("id") / len(CURRENCIES)).cast("long") % CATEGORIES)
    orders = F.col("id") * 7919 % 1000 + 1
    spark.range(rows).select(
        F.date_add(F.lit(FIRST_DAY), (F.col("id") / per_day).cast("int")).alias("day"),
        category.alias("category"),
        currency.alias("currency"),
        orders.alias("orders"),
        (orders * F.lit(12.34)).cast(DecimalType(18, 2)).alias("revenue"),
    ).coalesce(1).writeTo(qualified).append()
    return qualified


def _median_seconds(query: Callable[[], object]) -> float:
    """Median wall seconds of `query` over `RUNS` runs after `WARMUPS` unmeasured ones."""
    for _ in range(WARMUPS):
        query()
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        query()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 4)


def _thrift_median(settings: Settings) -> dict[str, float]:
    """Start the Spark Thrift Server for the home, time `QUERY` there, stop it."""
    from pyhive import hive

    from infra.sql import server as sql_server

    port = free_port()
    started = time.perf_counter()
    sql_server.start(settings, port=port)
    out = {"thrift_start_seconds": round(time.perf_counter() - started, 2)}
    try:
        password = sql_server.sql_password()  # the server requires it when TRIBUTARY_SQL_PASSWORD is set
        auth = {"auth": "CUSTOM", "password": password} if password else {}
        conn = hive.connect(sql_server.HOST, port, username="bench", database=sql_server.DEFAULT_DATABASE, **auth)
        try:
            cursor = conn.cursor()

            def query() -> None:
                cursor.execute(QUERY)
                cursor.fetchall()

            out["query_thrift_seconds"] = _median_seconds(query)
        finally:
            conn.close()
    finally:
        sql_server.stop(settings)
    return out


def bench_serving(settings: Settings, rows: int = 100_000, thrift: bool = True) -> dict:
    """Sync seconds (first, after a 1 % update, with nothing new), the lag from commit to served, and warm median
    seconds of one gold aggregate through PostgreSQL, `tributary sql`'s engine and (with `thrift`) the Spark Thrift
    Server; whether the served rows equal the lakehouse's."""
    import psycopg2

    from infra.serving import server
    from infra.serving.config import ServeSettings
    from infra.serving.sync import sync_table
    from infra.spark import get_spark
    from infra.sql.local import LocalEngine

    spark = get_spark(settings)
    qualified = _build_table(spark, settings, rows)
    settings.home.mkdir(parents=True, exist_ok=True)
    serve = ServeSettings(port=free_port(), password=secrets.token_hex(16))
    result: dict[str, object] = {"rows": rows}
    found = server.start(settings.home, serve)
    try:
        first = sync_table(settings, serve, TABLE, keys=KEYS)
        assert first is not None and first.mode == "created", first
        result["first_sync_seconds"] = first.seconds

        changed = spark.table(qualified).where(CHANGED).count()
        spark.sql(f"UPDATE {qualified} SET orders = orders + 1, revenue = revenue + 1 WHERE {CHANGED}")
        snapshot = spark.sql(f"SELECT snapshot_id FROM {qualified}.snapshots ORDER BY committed_at DESC LIMIT 1")
        result["changed_rows"] = changed
        result["update_snapshot"] = str(snapshot.first()[0])
        incremental = sync_table(settings, serve, TABLE, keys=KEYS)
        assert incremental is not None and incremental.mode == "incremental", incremental
        result["incremental_sync_seconds"] = incremental.seconds
        result["incremental_snapshot"] = incremental.snapshot
        result["inserted"], result["updated"], result["deleted"] = (
            incremental.inserted,
            incremental.updated,
            incremental.deleted,
        )
        result["lag_seconds"] = None if incremental.lag_seconds is None else round(incremental.lag_seconds, 3)
        unchanged = sync_table(settings, serve, TABLE, keys=KEYS)
        assert unchanged is not None and unchanged.mode == "unchanged", unchanged
        result["unchanged_sync_seconds"] = unchanged.seconds

        analyst = psycopg2.connect(
            host=found.host, port=found.port, user=found.analyst, password=serve.password, dbname=found.database
        )
        engine = LocalEngine(settings)
        try:
            with analyst.cursor() as cur:

                def served_query() -> list[tuple]:
                    cur.execute(QUERY)
                    return cur.fetchall()

                result["query_psycopg_seconds"] = _median_seconds(served_query)
                result["query_tributary_sql_seconds"] = _median_seconds(lambda: engine.query(QUERY).rows)
                cur.execute(ALL_ROWS)
                served_rows = sorted(cur.fetchall())
            lakehouse_rows = sorted(engine.query(ALL_ROWS).rows)
            result["served_equals_lakehouse"] = served_rows == lakehouse_rows and len(served_rows) == rows
        finally:
            engine.close()
            analyst.close()
    finally:
        server.stop(settings.home)

    if thrift:
        try:
            result.update(_thrift_median(settings))
        except Exception as exc:  # a missing or broken Thrift server leaves the PostgreSQL numbers standing
            result["thrift_error"] = f"{type(exc).__name__}: {exc}"
    result["targets"] = {
        "served_equals_lakehouse": result["served_equals_lakehouse"],
        "incremental_synced_the_update": result["incremental_snapshot"] == result["update_snapshot"],
        "incremental_updated_the_changed_rows": result["updated"] == changed
        and result["inserted"] == result["deleted"] == 0,
        "incremental_faster_than_first": result["incremental_sync_seconds"] < result["first_sync_seconds"],
        "unchanged_faster_than_incremental": result["unchanged_sync_seconds"] < result["incremental_sync_seconds"],
    }
    return result
