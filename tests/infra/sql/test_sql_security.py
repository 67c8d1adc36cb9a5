"""Read-only analyst SQL against a hostile client (issue 17, items 11-13).

Every write and escape attempt below is made for real against the three ways analysts reach the lakehouse:
`tributary sql` (DuckDB), `tributary sql --engine spark`, and the Thrift server over HiveServer2 (as BI tools
connect). Each must be refused with a message naming what was refused and why; afterwards the tables (row
counts), the catalog database and every file of the warehouse, landing zone and checkpoints are exactly as
before, and the folder the attacks aim at stays empty.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyhive import hive
from thrift.transport.TTransport import TTransportException

from infra.errors import ConfigError, TributaryError
from infra.ports import free_port
from infra.settings import Settings
from infra.spark import get_spark
from infra.sql.local import LocalEngine, settings_env
from infra.sql.query import run_query
from orchestration.cli.main import main
from pipelines.datasets import default_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io.formats import table_format
from pipelines.run.pipeline import run_pipeline
from tests.support.homes import make_settings
from tests.support.jvm import short_lived
from tests.support.sql_attacks import DUCKDB_ATTACKS, SPARK_ATTACKS

GOLD = ("gold.daily_revenue", "gold.event_counts_5m")
PASSWORD = "correct horse battery staple"


@dataclass(frozen=True)
class Lake:
    """A home with the demo tables, and an empty folder that writes and escapes aim at."""

    settings: Settings
    victim: Path

    def fill(self, template: str, **extra: object) -> str:
        """The statement with the lake's paths filled in."""
        warehouse = self.settings.warehouse
        return template.format(
            victim=self.victim,
            table_data=warehouse / "gold" / "event_counts_5m" / "data",
            data_file=next((warehouse / "gold" / "daily_revenue" / "data").rglob("*.parquet")),
            catalog_db=self.settings.catalog_db,
            cache=self.settings.home / "sql-cache",
            home=self.settings.home,
            **extra,
        )


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    settings = make_settings(tmp_path_factory.mktemp("sql-security"))
    assert get_spark(settings) is spark
    generate(settings.landing, rows=600, files=1, seed=31)
    run_pipeline(spark, settings, default_registry())
    assert any((settings.warehouse / "gold" / "event_counts_5m" / "data").rglob("*.parquet"))
    return Lake(settings, tmp_path_factory.mktemp("victim"))


def fingerprint(spark, settings: Settings) -> dict:
    """Row counts of gold, the catalog database's rows, and size + mtime of every data, landing, checkpoint file."""
    files = {}
    for root in (settings.warehouse, settings.landing, settings.checkpoints):
        for path in sorted(root.rglob("*")):
            if path.is_file():
                stat = path.stat()
                files[str(path)] = (stat.st_size, stat.st_mtime_ns)
    con = sqlite3.connect(f"{settings.catalog_db.as_uri()}?mode=ro", uri=True)
    try:
        catalog = sorted(con.execute("SELECT * FROM iceberg_tables").fetchall())
        catalog += sorted(con.execute("SELECT * FROM iceberg_namespace_properties").fetchall())
    finally:
        con.close()
    rows = {name: spark.table(table_format(settings).qualified(name)).count() for name in GOLD}
    return {"files": files, "catalog": catalog, "rows": rows}


@pytest.fixture
def untouched(spark, lake: Lake) -> Callable[[], None]:
    """Call at the end of a test: the lake is exactly as it was when the test started, the victim folder empty."""
    before = fingerprint(spark, lake.settings)
    assert all(before["rows"].values())

    def check() -> None:
        assert fingerprint(spark, lake.settings) == before
        assert sorted(lake.victim.iterdir()) == []

    return check


# ------------------------------------------------------------------------------------------- DuckDB


def _refusals(
    attempts: dict[str, tuple[str, str]],
    run: Callable[[str], object],
    lake: Lake,
    error: type[Exception] = TributaryError,
    **extra: object,
) -> list[str]:
    """Run every attempt; one line for each that was not refused with `error` and its expected one-line message."""
    wrong = []
    for name, (template, refusal) in sorted(attempts.items()):
        try:
            run(lake.fill(template, **extra))
        except Exception as exc:
            message = _server_error(exc)
            one_line = "\n" not in message and "the secret" not in message
            if not isinstance(exc, error) or not re.search(refusal, message) or not one_line:
                wrong.append(f"{name}: refused with {type(exc).__name__} {message[:300]!r}, expected {refusal!r}")
        else:
            wrong.append(f"{name}: was NOT refused (expected {refusal!r})")
    return wrong


def test_duckdb_engine_refuses_writes_and_file_access(lake: Lake, untouched, tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # DuckDB's default spill folder is <cwd>/.tmp, which it allowed reading
    (tmp_path / ".tmp").mkdir()
    (tmp_path / ".tmp" / "secret.txt").write_text("the secret\n")
    engine = LocalEngine(lake.settings)  # one session for every attempt, as in the interactive prompt
    try:
        wrong = _refusals(DUCKDB_ATTACKS, engine.query, lake, cwd=tmp_path)
        assert engine.query("SELECT count(*) FROM gold.daily_revenue").rows[0][0] > 0  # still answers queries
    finally:
        engine.close()
    assert not wrong, "\n".join(wrong)
    assert not list((lake.settings.home / "sql-cache").glob(".spill-*"))  # the private spill folder is gone
    untouched()


def test_empty_as_of_is_refused(lake: Lake, capsys, monkeypatch):
    for key, value in settings_env(lake.settings).items():
        monkeypatch.setenv(key, value)
    for engine in ("duckdb", "spark"):
        assert main(["sql", "--engine", engine, "--as-of", "", "SELECT count(*) FROM gold.daily_revenue"]) == 2
        err = capsys.readouterr().err
        assert "--as-of is empty" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(ConfigError, match="--as-of is empty"):
        LocalEngine(lake.settings, as_of="  ")


# -------------------------------------------------------------------------------------- Spark (local)


def test_spark_engine_refuses_writes_and_escapes(lake: Lake, untouched):
    def run(sql: str) -> object:
        return run_query(lake.settings, sql, engine="spark")

    wrong = _refusals(SPARK_ATTACKS, run, lake)
    assert not wrong, "\n".join(wrong)
    assert run("SELECT count(*) FROM gold.daily_revenue").rows[0][0] > 0  # still answers queries
    untouched()


def test_spark_engine_opens_the_catalog_read_only(spark, lake: Lake, untouched):
    from infra.sql.spark_engine import read_only_session

    session = read_only_session(spark, lake.settings)
    assert session.conf.get("spark.sql.runSQLOnFiles") == "false"
    # Past the statement checks, the catalog connection itself refuses to write.
    with pytest.raises(Exception, match=r"SQLITE_READONLY"):
        session.sql("CREATE NAMESPACE scratch")
    assert run_query(lake.settings, "SELECT count(*) FROM gold.daily_revenue", engine="spark").rows[0][0] > 0
    untouched()


# ------------------------------------------------------------------------------------- Thrift server


@dataclass(frozen=True)
class Server:
    """A running SQL server and what `tributary sql-server start` printed."""

    port: int
    started: str


@pytest.fixture(scope="module")
def server(lake: Lake) -> Iterator[Server]:
    """The read-only SQL server of the lake, started with TRIBUTARY_SQL_PASSWORD=PASSWORD."""
    port = free_port()
    env = short_lived(
        {
            **os.environ,
            **settings_env(lake.settings),
            "TRIBUTARY_SQL_PORT": str(port),
            "TRIBUTARY_DRIVER_MEMORY": "1g",
            "TRIBUTARY_SQL_PASSWORD": PASSWORD,
        }
    )

    def cli(action: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "orchestration.cli.main", "sql-server", action]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)

    started = cli("start")
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield Server(port, started.stdout + started.stderr)
    finally:
        cli("stop")


def _connect(port: int, password: str = PASSWORD, configuration: dict[str, str] | None = None) -> hive.Connection:
    return hive.connect(
        "127.0.0.1", port, username="analyst", auth="CUSTOM", password=password, database="gold",
        configuration=configuration,
    )  # fmt: skip


def _server_error(exc: BaseException) -> str:
    status = getattr(exc.args[0], "status", None) if exc.args else None
    return status.errorMessage if status is not None else str(exc)


@pytest.mark.slow
def test_server_requires_the_password(server: Server, lake: Lake):
    assert "auth:     password required (TRIBUTARY_SQL_PASSWORD)" in server.started
    cursor = _connect(server.port).cursor()
    cursor.execute("SELECT count(*) FROM gold.daily_revenue")
    assert cursor.fetchall()[0][0] > 0
    for password in ("wrong", ""):
        with pytest.raises(TTransportException, match="Error validating the login"):
            _connect(server.port, password=password)
    with pytest.raises(TTransportException, match="Error validating the login"):
        hive.connect("127.0.0.1", server.port, username="analyst", database="gold")  # no authentication at all
    # The secret is read from the server's environment: never on a command line, where any user could read it.
    state = lake.settings.home / "sql-server"
    pid = json.loads((state / "server.pid").read_text())["pid"]
    assert PASSWORD.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert (state / "spark.properties").stat().st_mode & 0o077 == 0  # Spark settings: readable by the owner only


@pytest.mark.slow
def test_server_refuses_writes_and_escapes(spark, server: Server, lake: Lake, untouched):
    cursor = _connect(server.port).cursor()
    wrong = _refusals(SPARK_ATTACKS, cursor.execute, lake, error=hive.OperationalError)
    assert not wrong, "\n".join(wrong)
    with pytest.raises(hive.OperationalError) as info:  # Spark 4 parses CALL itself: the guard refuses it
        cursor.execute("CALL system.expire_snapshots(table => 'gold.daily_revenue')")
    assert "CALL is refused: read-only SQL runs queries only" in _server_error(info.value)
    # The same session still answers queries, time travel and metadata statements.
    rows = spark.table(table_format(lake.settings).qualified("gold.daily_revenue")).count()
    cursor.execute("SELECT snapshot_id FROM gold.daily_revenue.snapshots ORDER BY committed_at DESC LIMIT 1")
    snapshot = cursor.fetchall()[0][0]
    cursor.execute(f"SELECT count(*) FROM gold.daily_revenue FOR VERSION AS OF {snapshot}")
    assert cursor.fetchall() == [(rows,)]
    for statement in ("SHOW TABLES IN gold", "DESCRIBE gold.daily_revenue", "EXPLAIN SELECT 1", "SHOW NAMESPACES"):
        cursor.execute(statement)
        assert cursor.fetchall()
    untouched()


@pytest.mark.slow
@pytest.mark.parametrize(
    "override",
    [
        "set:hiveconf:spark.sql.catalog.{catalog}.uri",  # the attack: the catalog opened writable
        "set:hivevar:spark.sql.catalog.{catalog}.uri",  # the Thrift Server copies Hive variables into the session
        "set:hiveconf:spark.sql.runSQLOnFiles",
    ],
)
def test_server_refuses_sessions_with_configuration_overrides(server: Server, lake: Lake, untouched, override: str):
    settings = lake.settings
    key = override.format(catalog=settings.catalog_name)
    value = "true" if key.endswith("runSQLOnFiles") else f"jdbc:sqlite:{settings.catalog_db}"
    with pytest.raises(hive.OperationalError) as info:
        cursor = _connect(server.port, configuration={key: value}).cursor()  # connecting runs USE gold: refused
        cursor.execute("INSERT INTO gold.daily_revenue SELECT * FROM gold.daily_revenue")
    message = _server_error(info.value)
    changed = key.split(":", 2)[2]
    assert f"this session is refused: it changed the server's configuration ({changed})" in message
    untouched()


@pytest.mark.slow
def test_server_session_cannot_register_a_writable_catalog(server: Server, lake: Lake, untouched):
    settings = lake.settings
    cursor = _connect(server.port).cursor()
    for key, value in (
        ("spark.sql.catalog.rw2", "org.apache.iceberg.spark.SparkCatalog"),
        ("spark.sql.catalog.rw2.catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog"),
        ("spark.sql.catalog.rw2.uri", f"jdbc:sqlite:{settings.catalog_db}"),
        ("spark.sql.catalog.rw2.warehouse", settings.warehouse.as_uri()),
        ("spark.sql.catalog.rw2.jdbc.schema-version", "V1"),
    ):
        with pytest.raises(hive.OperationalError) as info:
            cursor.execute(f"SET `{key}`={value}")
        assert "SET is refused: the session configuration is fixed" in _server_error(info.value)
    for statement in ("CREATE TABLE rw2.gold.scratch (a INT)", "DROP TABLE rw2.gold.daily_revenue"):
        with pytest.raises(hive.OperationalError) as info:
            cursor.execute(statement)
        assert "TABLE is refused: read-only SQL runs queries only" in _server_error(info.value)
    untouched()


@pytest.mark.slow
def test_server_ignores_statement_configuration_overlays(server: Server, lake: Lake, untouched):
    from TCLIService import ttypes

    settings = lake.settings
    conn = _connect(server.port)
    overlay = {f"spark.sql.catalog.{settings.catalog_name}.uri": f"jdbc:sqlite:{settings.catalog_db}"}
    for statement in ("INSERT INTO gold.daily_revenue SELECT * FROM gold.daily_revenue", "SELECT 1"):
        request = ttypes.TExecuteStatementReq(conn._sessionHandle, statement, confOverlay=overlay, runAsync=False)
        response = conn._client.ExecuteStatement(request)
        if statement.startswith("INSERT"):
            assert "INSERT INTO is refused" in response.status.errorMessage
        else:  # the overlay did not reach the session: it is not refused as a changed configuration
            assert response.status.statusCode == ttypes.TStatusCode.SUCCESS_STATUS, response.status.errorMessage
    untouched()
