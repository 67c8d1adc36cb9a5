"""Served tables in a real PostgreSQL: every client reads what `tributary sql` reads, on Iceberg and Delta homes;
a sync killed after any statement leaves the previous snapshot and the next completes it; readers during syncs
see whole snapshots only; analysts can read and nothing else."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path

import pandas as pd
import psycopg
import psycopg2
import pytest
import sqlalchemy

from infra.jars import POSTGRES_JDBC, maven_jar
from infra.ports import free_port
from infra.serving import server
from infra.serving.config import ServeSettings, outside_folder
from infra.serving.server import Endpoint
from infra.serving.sync import ServeError, sync_table
from infra.settings import Settings
from infra.spark import get_spark
from infra.sql.local import LocalEngine
from orchestration.cli.main import main
from pipelines.datasets import default_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io.formats import table_format
from pipelines.ops.serve import sync_served
from pipelines.run.pipeline import run_pipeline
from tests.support.homes import make_settings
from tests.support.repo import REPO

pytestmark = pytest.mark.slow
CHAIN = ["bronze.events", "silver.events", "gold.daily_revenue", "gold.event_counts_5m"]
GOLD_QUERY = (
    "SELECT event_date, category, currency, orders, units, revenue FROM gold.daily_revenue "
    "WHERE currency = {} ORDER BY 1, 2, 3"
)
_passwords = itertools.count()


@dataclass(frozen=True)
class Served:
    """A home whose serving server runs."""

    settings: Settings
    serve: ServeSettings
    endpoint: Endpoint

    def analyst(self, **options):
        """A psycopg2 connection as the analysts' role."""
        e = self.endpoint
        return psycopg2.connect(
            host=e.host, port=e.port, user=e.analyst, password=self.serve.password, dbname=e.database, **options
        )

    def env(self) -> dict[str, str]:
        return {**os.environ, "PGPASSWORD": self.serve.password or ""}


def _home(spark, table_format_name: str, private: bool = False) -> Settings:
    """A home PostgreSQL's user can reach, or one in a private folder (mode 0700, as `mktemp -d` makes it and as
    root's home is), whose server then keeps its data outside the home."""
    root = Path(tempfile.mkdtemp(prefix="tributary-serve-"))
    if not private:
        root.chmod(0o711)
    settings = replace(make_settings(root / "project" if private else root), table_format=table_format_name)
    assert get_spark(settings) is spark
    return settings


def _serve(settings: Settings) -> Served:
    serve = ServeSettings(port=free_port(), password=f"analyst-secret-{next(_passwords)}")
    return Served(settings, serve, server.start(settings.home, serve))


@pytest.fixture(scope="module")
def homes(spark) -> Iterator[dict[str, Served]]:
    """An Iceberg and a Delta home with the events chain run on the same landing, each serving its gold tables."""
    out = {}
    try:
        for name in ("iceberg", "delta"):
            settings = _home(spark, name, private=name == "delta")
            generate(settings.landing, rows=1500, files=2, seed=11)
            run_pipeline(spark, settings, default_registry(), CHAIN)
            out[name] = _serve(settings)
            reports = sync_served(settings, default_registry(), serve=out[name].serve)
            assert [r.table for r in reports] == ["gold.daily_revenue", "gold.event_counts_5m"], reports
        yield out
    finally:
        for served in out.values():
            home = served.settings.home
            server.stop(home)
            shutil.rmtree(outside_folder(home), ignore_errors=True)
            shutil.rmtree(home.parent if home.name == "project" else home, ignore_errors=True)


def _local(settings: Settings, sql: str) -> list[tuple]:
    return LocalEngine(settings).query(sql).rows


def _psql(served: Served, *arguments: str) -> list[str]:
    e = served.endpoint
    command = ["psql", "-X", "-A", "-t", "-F", "|", "-h", e.host, "-p", str(e.port), "-U", e.analyst, e.database]
    done = subprocess.run([*command, *arguments], env=served.env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize("name", ["iceberg", "delta"])
def test_every_client_reads_what_tributary_sql_reads(homes, name):
    served = homes[name]
    expected = _local(served.settings, GOLD_QUERY.format("'USD'"))
    assert expected, "no USD revenue: the comparison would prove nothing"
    as_text = ["|".join(str(v) for v in row) for row in expected]
    e = served.endpoint

    assert _psql(served, "-c", GOLD_QUERY.format("'USD'")) == as_text
    listed = {line.split("|")[1] for line in _psql(served, "-c", r"\dt gold.*")}
    assert listed == {"daily_revenue", "event_counts_5m"}
    description = default_registry().get("gold.daily_revenue").description
    assert description and _psql(served, "-c", "SELECT obj_description('gold.daily_revenue'::regclass)") == [
        description
    ]

    with served.analyst() as db, db.cursor() as cur:
        cur.execute(GOLD_QUERY.format("%s"), ("USD",))
        assert cur.fetchall() == expected  # dates, Decimals and ints equal to DuckDB's
    conninfo = f"host={e.host} port={e.port} user={e.analyst} password={served.serve.password} dbname={e.database}"
    with psycopg.connect(conninfo) as db:
        assert db.execute(GOLD_QUERY.format("%s"), ("USD",)).fetchall() == expected
    engine = sqlalchemy.create_engine(
        f"postgresql+psycopg2://{e.analyst}:{served.serve.password}@{e.host}:{e.port}/{e.database}"
    )
    try:
        frame = pd.read_sql(
            sqlalchemy.text(GOLD_QUERY.format(":currency")), engine, params={"currency": "USD"}, coerce_float=False
        )
    finally:
        engine.dispose()
    assert ["|".join(str(v) for v in row) for row in frame.itertuples(index=False)] == as_text

    jar = maven_jar(POSTGRES_JDBC, served.settings.jar_cache)
    url = f"jdbc:postgresql://{e.host}:{e.port}/{e.database}"
    program = str(REPO / "tests" / "support" / "JdbcQuery.java")
    jdbc = subprocess.run(
        ["java", "-cp", str(jar), program, url, e.analyst, served.serve.password, GOLD_QUERY.format("?"), "USD"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert jdbc.returncode == 0, jdbc.stderr
    assert jdbc.stdout.splitlines() == as_text


def _probe(spark, settings: Settings, rows: int = 400) -> str:
    """A keyed lakehouse table of `rows` rows (gold.probe); its Spark name."""
    name = table_format(settings).qualified("gold.probe")
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} (k INT, v DECIMAL(12,2), note STRING) USING iceberg")
    spark.sql(f"INSERT INTO {name} SELECT id, id * 1.25, concat('n', id) FROM range({rows})")
    spark.sql(f"INSERT INTO {name} VALUES (NULL, 9.99, 'no key')")  # a NULL key is a key too
    return name


def _served_rows(served: Served, table: str = "gold.probe") -> list[tuple]:
    with served.analyst() as db, db.cursor() as cur:
        cur.execute(f"SELECT * FROM {table} ORDER BY 1")
        return cur.fetchall()


def _synced(served: Served, table: str = "gold.probe") -> str:
    with served.analyst() as db, db.cursor() as cur:
        cur.execute("SELECT snapshot FROM _tributary.synced WHERE table_name = %s", (table,))
        return cur.fetchone()[0]


def _kill_after(served: Served, statement: int) -> subprocess.CompletedProcess:
    s = served.settings
    arguments = [str(s.home), s.catalog_name, "gold.probe", "k", str(statement)]
    env = {**os.environ, "TRIBUTARY_PG_PORT": str(served.serve.port)}
    command = [sys.executable, "-m", "tests.support.serve_child", *arguments]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, cwd=REPO)


def test_a_sync_killed_after_any_statement_leaves_the_last_snapshot_and_the_next_completes_it(spark, homes):
    served = homes["iceberg"]
    name = _probe(spark, served.settings)
    sync_table(served.settings, served.serve, "gold.probe", ("k",))
    changes = itertools.count()

    def change() -> None:  # an update, a delete and an insert: one new lakehouse snapshot each
        n = next(changes)
        spark.sql(f"UPDATE {name} SET v = v + 1, note = 'changed {n}' WHERE k % 7 = {n % 7} OR k IS NULL")
        spark.sql(f"DELETE FROM {name} WHERE k = {n * 13}")
        spark.sql(f"INSERT INTO {name} VALUES ({1000 + n}, 0.5, NULL)")

    change()
    total = _kill_after(served, 10_000)  # not killed: it counts the statements of an incremental sync
    assert total.returncode == 0, total.stderr
    statements = int(total.stdout.split("statements: ")[1])
    assert statements >= 8, total.stdout
    for point in range(1, statements + 1):
        change()
        before, snapshot = _served_rows(served), _synced(served)
        killed = _kill_after(served, point)
        assert killed.returncode == -9, (point, killed.stdout, killed.stderr)
        assert _served_rows(served) == before and _synced(served) == snapshot, f"half a sync after statement {point}"
        report = sync_table(served.settings, served.serve, "gold.probe", ("k",))
        assert report.mode == "incremental" and report.updated > 0 and report.deleted + report.inserted > 0
        lake = [tuple(r) for r in spark.sql(f"SELECT k, v, note FROM {name} ORDER BY k NULLS LAST").collect()]
        assert _served_rows(served) == lake, f"served table differs from the lakehouse after a kill at {point}"
    assert sync_table(served.settings, served.serve, "gold.probe", ("k",)).mode == "unchanged"


def test_twenty_analysts_querying_during_syncs_see_whole_snapshots_only(spark, homes):
    served = homes["iceberg"]
    name = _probe(spark, served.settings, rows=3000)

    def totals() -> tuple[int, Decimal]:
        row = spark.sql(f"SELECT count(*), sum(v) FROM {name}").first()
        return int(row[0]), row[1]

    allowed = {totals()}
    sync_table(served.settings, served.serve, "gold.probe", ("k",))
    seen: list[tuple[int, Decimal]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def analyst() -> None:
        try:
            with served.analyst() as db:
                db.autocommit = True
                with db.cursor() as cur:
                    while not stop.wait(0.01):  # a pause, so that 20 readers leave the syncs some CPU
                        cur.execute("SELECT count(*), sum(v) FROM gold.probe")
                        seen.append(cur.fetchone())
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=analyst) for _ in range(20)]
    for thread in threads:
        thread.start()
    try:
        for n in range(4):
            spark.sql(f"UPDATE {name} SET v = v + {n + 1} WHERE k % 3 = {n % 3}")
            spark.sql(f"DELETE FROM {name} WHERE k < {(n + 1) * 40}")
            allowed.add(totals())
            assert sync_table(served.settings, served.serve, "gold.probe", ("k",)).changed
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert not errors, errors[:3]
    observed = set(seen)
    assert observed <= allowed, f"states no snapshot had: {sorted(observed - allowed)[:3]}"
    assert len(observed) >= 3, f"the readers saw too few snapshots to prove anything: {observed}"


# Statements an analyst sends that must all fail: writes, DDL, server files and programs, roles and settings.
REFUSED = [
    "INSERT INTO gold.daily_revenue (category) VALUES ('x')",
    "UPDATE gold.daily_revenue SET orders = 0",
    "DELETE FROM gold.daily_revenue",
    "TRUNCATE gold.daily_revenue",
    "DROP TABLE gold.daily_revenue",
    "ALTER TABLE gold.daily_revenue ADD COLUMN x int",
    "CREATE TABLE gold.evil (a int)",
    "CREATE TABLE public.evil (a int)",
    "CREATE TEMP TABLE evil (a int)",
    "CREATE SCHEMA evil",
    "CREATE VIEW gold.evil AS SELECT 1",
    "CREATE FUNCTION public.evil() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    "CREATE TABLE evil AS SELECT * FROM gold.daily_revenue",
    "SELECT * INTO gold.evil FROM gold.daily_revenue",
    "COMMENT ON TABLE gold.daily_revenue IS 'x'",
    "CREATE INDEX evil ON gold.daily_revenue (orders)",
    "REINDEX TABLE gold.daily_revenue",
    "CLUSTER gold.daily_revenue USING daily_revenue_keys",
    "LOCK TABLE gold.daily_revenue IN ACCESS EXCLUSIVE MODE",
    "UPDATE _tributary.synced SET snapshot = 'forged'",
    "SET default_transaction_read_only = off; DELETE FROM gold.daily_revenue",
    "SET transaction_read_only = off; INSERT INTO _tributary.synced VALUES ('x', 'x', 'x', 0, now(), now())",
    "DO $$ BEGIN EXECUTE 'DELETE FROM gold.daily_revenue'; END $$",
    "COPY gold.daily_revenue TO '/tmp/tributary-evil.csv'",
    "COPY gold.daily_revenue FROM '/etc/passwd'",
    "COPY (SELECT 1) TO PROGRAM 'touch /tmp/tributary-evil'",
    "COPY gold.daily_revenue FROM PROGRAM 'echo 1'",
    "SELECT pg_read_file('/etc/passwd')",
    "SELECT pg_read_binary_file('/etc/passwd')",
    "SELECT pg_ls_dir('.')",
    "SELECT lo_import('/etc/passwd')",
    "CREATE ROLE evil",
    "ALTER ROLE analyst SUPERUSER",
    "ALTER ROLE tributary_sync PASSWORD 'evil'",
    "GRANT tributary_sync TO analyst",
    "SET ROLE tributary_sync",
    "SET SESSION AUTHORIZATION tributary_sync",
    "ALTER SYSTEM SET listen_addresses = '*'",
    "SET log_statement = 'none'",
    "SELECT set_config('log_connections', 'off', false)",
    "ALTER DATABASE tributary SET work_mem = '1GB'",
    "CREATE DATABASE evil",
    "CREATE EXTENSION IF NOT EXISTS dblink",
]


def test_analysts_can_read_and_nothing_else(homes):
    served = homes["iceberg"]
    totals = "SELECT count(*), sum(revenue) FROM gold.daily_revenue"
    with served.analyst() as db, db.cursor() as cur:
        cur.execute(totals)
        before = cur.fetchone()
    assert len(REFUSED) >= 30
    accepted = []
    for statement in REFUSED:
        db = served.analyst()
        try:
            with db.cursor() as cur:
                cur.execute(statement)
            db.commit()
            accepted.append(statement)
        except psycopg2.Error:
            pass
        finally:
            db.close()
    assert not accepted, accepted
    assert not Path("/tmp/tributary-evil").exists() and not Path("/tmp/tributary-evil.csv").exists()
    with served.analyst() as db, db.cursor() as cur:
        cur.execute(totals)
        assert cur.fetchone() == before
        cur.execute("SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user")
        assert cur.fetchone() == (False, False, False)


def test_a_home_in_a_private_folder_is_served_without_loosening_the_folder(homes):
    private = homes["delta"].settings.home
    assert (private.parent.stat().st_mode & 0o777) == 0o700  # as the user made it
    if os.geteuid() == 0:  # the server runs as `postgres`, which cannot enter the folder: its data is outside
        assert server.serve_folder(private) == outside_folder(private)
        assert (outside_folder(private) / "postgres" / "PG_VERSION").is_file()
    assert server.running(private)
    with homes["delta"].analyst() as db, db.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM gold.daily_revenue")
        assert cursor.fetchone()[0] > 0


def test_passwords_databases_and_addresses(homes):
    served = homes["iceberg"]
    e = served.endpoint
    with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
        psycopg2.connect(host=e.host, port=e.port, user=e.analyst, password="wrong", dbname=e.database)
    with pytest.raises(psycopg2.OperationalError, match="no password supplied"):
        psycopg2.connect(host=e.host, port=e.port, user=e.analyst, dbname=e.database)
    with pytest.raises(psycopg2.OperationalError, match="permission denied for database"):
        psycopg2.connect(host=e.host, port=e.port, user=e.analyst, password=served.serve.password, dbname="postgres")
    listening = subprocess.run(["ss", "-ltnH", f"sport = :{e.port}"], capture_output=True, text=True, check=True)
    addresses = {line.split()[3] for line in listening.stdout.splitlines()}
    assert addresses == {f"127.0.0.1:{e.port}"}


def test_start_refuses_without_a_password_and_names_the_setting(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("TRIBUTARY_SQL_PASSWORD", raising=False)
    monkeypatch.delenv("TRIBUTARY_SQL_ALLOW_NO_PASSWORD", raising=False)
    assert main(["--home", str(tmp_path), "serve", "start"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "TRIBUTARY_SQL_PASSWORD is not set" in err and "ALLOW_NO_PASSWORD=1" in err
    assert not (tmp_path / "serve").exists()


def test_columns_follow_the_lakehouse_or_the_sync_refuses_naming_the_fix(spark, homes):
    served = homes["iceberg"]
    name = _probe(spark, served.settings, rows=50)
    sync_table(served.settings, served.serve, "gold.probe", ("k",))
    spark.sql(f"ALTER TABLE {name} ADD COLUMN extra TIMESTAMP")
    spark.sql(f"INSERT INTO {name} VALUES (500, 1.00, 'new', TIMESTAMP '2026-01-02 03:04:05')")
    assert sync_table(served.settings, served.serve, "gold.probe", ("k",)).inserted == 1
    [added] = [row for row in _served_rows(served) if row[0] == 500]
    assert added[3].isoformat() == "2026-01-02T03:04:05+00:00"
    before = _served_rows(served)
    spark.sql(f"ALTER TABLE {name} DROP COLUMN note")
    with pytest.raises(ServeError, match=r"column note was dropped .* 'tributary serve refresh gold\.probe'"):
        sync_table(served.settings, served.serve, "gold.probe", ("k",))
    assert _served_rows(served) == before
    report = sync_table(served.settings, served.serve, "gold.probe", ("k",), refresh=True)
    assert report.mode == "refreshed"
    lake = [tuple(r) for r in spark.sql(f"SELECT * FROM {name} ORDER BY k NULLS LAST").collect()]
    assert [(k, v, x.replace(tzinfo=None) if x else None) for k, v, x in _served_rows(served)] == lake


def test_every_column_type_lands_as_its_postgresql_type(spark, homes):
    served = homes["iceberg"]
    name = table_format(served.settings).qualified("gold.types")
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(
        f"CREATE TABLE {name} USING iceberg AS SELECT 1 AS i, CAST(2 AS BIGINT) AS b, true AS f, "
        "CAST(1.5 AS FLOAT) AS r, CAST(2.25 AS DOUBLE) AS d, CAST('12345678901234567890.1234567891' AS "
        "DECIMAL(38,10)) AS dec, DATE '2026-03-04' AS day, TIMESTAMP '2026-03-04 05:06:07.123456' AS ts, "
        "CAST('2026-03-04 05:06:07' AS TIMESTAMP_NTZ) AS ntz, 'quote \" comma , newline \n end' AS s, '' AS empty, "
        "CAST(NULL AS STRING) AS missing, X'00FF' AS bin, array(1, 2, NULL) AS arr, map('a', 1) AS m, "
        "named_struct('x', 1, 'y', 'z') AS st"
    )
    report = sync_table(served.settings, served.serve, "gold.types")
    assert report.rows == 1
    with served.analyst() as db, db.cursor() as cur:
        cur.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = 'gold.types'::regclass AND attnum > 0 ORDER BY attnum"
        )
        types = dict(cur.fetchall())
        cur.execute("SELECT * FROM gold.types")
        row = dict(zip([c.name for c in cur.description], cur.fetchone(), strict=True))
    assert types == {
        "i": "integer", "b": "bigint", "f": "boolean", "r": "real", "d": "double precision",
        "dec": "numeric(38,10)", "day": "date", "ts": "timestamp with time zone",
        "ntz": "timestamp without time zone", "s": "text", "empty": "text", "missing": "text", "bin": "bytea",
        "arr": "jsonb", "m": "jsonb", "st": "jsonb",
    }  # fmt: skip
    assert row["dec"] == Decimal("12345678901234567890.1234567891")  # never rounded
    assert row["ts"].isoformat() == "2026-03-04T05:06:07.123456+00:00"
    assert row["s"] == 'quote " comma , newline \n end' and row["empty"] == "" and row["missing"] is None
    assert bytes(row["bin"]) == b"\x00\xff"
    assert row["arr"] == [1, 2, None] and row["m"] == {"a": 1} and row["st"] == {"x": 1, "y": "z"}


def test_a_run_syncs_its_served_tables_and_tables_shows_them_in_sync(spark, homes, monkeypatch, capsys):
    served = homes["iceberg"]
    s = served.settings
    monkeypatch.setenv("TRIBUTARY_CATALOG_NAME", s.catalog_name)
    generate(s.landing, rows=300, files=1, seed=12)
    before = _synced(served, "gold.daily_revenue")
    assert main(["--home", str(s.home), "run", *CHAIN]) == 0
    out = capsys.readouterr().out
    assert "served gold.daily_revenue: snapshot" in out and "(incremental: " in out, out
    assert _synced(served, "gold.daily_revenue") != before
    expected = _local(s, GOLD_QUERY.format("'EUR'"))
    with served.analyst() as db, db.cursor() as cur:
        cur.execute(GOLD_QUERY.format("%s"), ("EUR",))
        assert cur.fetchall() == expected
    assert main(["--home", str(s.home), "tables", "--format", "csv"]) == 0
    lines = [line.split(",") for line in capsys.readouterr().out.splitlines()]
    served_of = {line[0]: line[-1] for line in lines[1:]}
    assert served_of["gold.daily_revenue"] == "in sync" and served_of["silver.events"] == "-"


def test_the_serving_asset_records_the_synced_snapshot_or_is_skipped_when_nothing_serves(homes, tmp_path):
    from dagster import materialize

    from orchestration.resources import SparkResource
    from orchestration.serving import build_serving_asset, serving_key

    served = homes["delta"]
    asset = build_serving_asset(default_registry().get("gold.daily_revenue"))
    resource = SparkResource(home=str(served.settings.home), catalog_name=served.settings.catalog_name)
    result = materialize([asset], resources={"spark": resource})
    [materialization] = result.asset_materializations_for_node(asset.op.name)
    assert materialization.asset_key == serving_key("gold.daily_revenue")
    metadata = {k: v.value for k, v in materialization.metadata.items()}
    assert metadata["snapshot"] == _synced(served, "gold.daily_revenue")
    assert metadata["table_rows"] == len(_served_rows(served, "gold.daily_revenue"))
    assert metadata["mode"] == "unchanged" and metadata["rows_written"] == 0

    idle = materialize([asset], resources={"spark": SparkResource(home=str(tmp_path))})
    assert idle.success and not idle.asset_materializations_for_node(asset.op.name)


def test_tables_are_published_into_an_existing_postgresql_given_by_url(homes, monkeypatch, capsys):
    target, source = homes["iceberg"], homes["delta"]
    password = (target.settings.home / "serve" / "sync.password").read_text().strip()
    url = f"postgresql://tributary_sync:{password}@127.0.0.1:{target.endpoint.port}/tributary"
    elsewhere = replace(source.serve, url=url)
    report = sync_table(source.settings, elsewhere, "gold.daily_revenue", ("event_date", "category", "currency"))
    assert report.mode == "incremental"
    with target.analyst() as db, db.cursor() as cur:
        cur.execute(GOLD_QUERY.format("%s"), ("USD",))
        assert cur.fetchall() == _local(source.settings, GOLD_QUERY.format("'USD'"))
        cur.execute("SELECT table_id FROM _tributary.synced WHERE table_name = 'gold.daily_revenue'")
        assert cur.fetchone()[0].startswith(table_format(source.settings).table_id(None, "gold.daily_revenue"))
    monkeypatch.setenv("TRIBUTARY_SERVE_URL", url)
    assert main(["--home", str(source.settings.home), "serve", "start"]) == 2
    assert "TRIBUTARY_SERVE_URL is set" in capsys.readouterr().err
    monkeypatch.setenv("TRIBUTARY_SERVE_URL", "postgresql://nobody:x@127.0.0.1:1/tributary")
    assert main(["--home", str(source.settings.home), "serve", "sync"]) == 2
    assert "cannot reach TRIBUTARY_SERVE_URL (127.0.0.1:1/tributary)" in capsys.readouterr().err


def test_analysts_without_a_password_only_when_allowed_and_warned(capsys):
    root = Path(tempfile.mkdtemp(prefix="tributary-serve-open-"))
    root.chmod(0o711)
    open_serve = ServeSettings(port=free_port(), password=None, allow_no_password=True)
    try:
        found = server.start(root, open_serve)
        assert "log in without a password" in capsys.readouterr().err
        db = psycopg2.connect(host=found.host, port=found.port, user=found.analyst, dbname=found.database)
        try:
            with db.cursor() as cur:
                cur.execute("SELECT current_user")
                assert cur.fetchone() == ("analyst",)
        finally:
            db.close()
        server.start(root, replace(open_serve, password="now-required", allow_no_password=False))
        with pytest.raises(psycopg2.OperationalError, match="no password supplied"):
            psycopg2.connect(host=found.host, port=found.port, user=found.analyst, dbname=found.database)
    finally:
        server.stop(root)
        shutil.rmtree(root, ignore_errors=True)
