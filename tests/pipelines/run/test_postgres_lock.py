"""The writer lock of a home whose catalog is PostgreSQL: an advisory lock on the catalog database, seen by every host
that reaches it (no shared disk), released by the server when its holder dies, and fenced: a writer that lost it
stops before its next commit. Against a real PostgreSQL server; no Spark."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psycopg2
import pytest

from infra.deploy import postgres
from infra.errors import PipelineError
from infra.ports import free_port
from infra.settings import Settings
from pipelines.run.locks import table_lock, writer_lock
from pipelines.run.locks.postgres import HOLDERS, PostgresLock
from tests.support.homes import make_settings
from tests.support.repo import REPO

TABLE = "bronze.events"


@pytest.fixture(scope="module")
def server() -> Iterator[postgres.Postgres]:
    """A PostgreSQL server on a free port of 127.0.0.1 holding the catalog database `tributary`."""
    # Not under pytest's temporary folder: PostgreSQL runs as its own user, which must reach its data folder.
    folder = Path(tempfile.mkdtemp(prefix="tributary-lock-pg-"))
    folder.chmod(0o711)
    try:
        yield postgres.start(folder, free_port(), databases=("tributary",))
    finally:
        postgres.stop(folder)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def pg_settings(server: postgres.Postgres, tmp_path: Path) -> Settings:
    """A home whose catalog database is the server's; its checkpoints folder is this test's own (no shared disk)."""
    return replace(make_settings(tmp_path / "home"), catalog_uri=server.jdbc("tributary"), lock_wait_seconds=0)


def _hold(settings: Settings, seconds: float = 600) -> subprocess.Popen[str]:
    """Another process (on another home folder: nothing shared but the database) holding the lock."""
    env = {**os.environ, "TRIBUTARY_CATALOG_URI": settings.jdbc_catalog_uri}
    env["TRIBUTARY_HOME"] = str(settings.home.parent / "other-host")
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, settings.catalog_name, str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder


_HOLD_LOCK = """
import sys, time
from dataclasses import replace
from infra.settings import Settings
from pipelines.run.locks import table_lock
s = replace(Settings.from_env(), catalog_name=sys.argv[1])
with table_lock(s, "bronze.events", wait_seconds=0):
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _admin(server: postgres.Postgres) -> psycopg2.extensions.connection:
    connection = psycopg2.connect(
        host="127.0.0.1", port=server.port, user=postgres.ROLE, password=server.password, dbname="tributary"
    )
    connection.autocommit = True
    return connection


def test_a_postgresql_catalog_gives_advisory_locks(pg_settings):
    assert isinstance(writer_lock(pg_settings, TABLE), PostgresLock)
    assert not (pg_settings.checkpoints / "_locks").exists()


def test_a_second_writer_on_another_home_fails_naming_the_first(pg_settings):
    holder = _hold(pg_settings)
    try:
        expected = rf"table bronze\.events is being written by pid {holder.pid} on {socket.gethostname()} since "
        with pytest.raises(PipelineError, match=expected + r".*TRIBUTARY_LOCK_WAIT"), table_lock(pg_settings, TABLE, 0):
            pass
        # Another table of the same catalog, and the same table of another catalog, are free.
        with table_lock(pg_settings, "silver.events", wait_seconds=0):
            pass
        with table_lock(replace(pg_settings, catalog_name="other"), TABLE, wait_seconds=0):
            pass
    finally:
        holder.kill()
        holder.wait()


def test_a_waiting_writer_goes_on_when_the_first_finishes(pg_settings, caplog):
    holder = _hold(pg_settings, seconds=2)
    started = time.monotonic()
    with caplog.at_level("WARNING", logger="tributary"), table_lock(pg_settings, TABLE, wait_seconds=60) as held:
        waited = time.monotonic() - started
        held.fence()  # held: no error
    assert holder.wait(timeout=30) == 0
    assert 0.5 < waited < 30
    assert f"table bronze.events is being written by pid {holder.pid}" in caplog.text


def test_the_lock_of_a_killed_holder_is_released_by_the_server(pg_settings, server):
    holder = _hold(pg_settings)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    started = time.monotonic()
    with table_lock(replace(pg_settings, lock_wait_seconds=30), TABLE, wait_seconds=30):
        assert time.monotonic() - started < 10
        with _admin(server) as admin, admin.cursor() as cur:
            cur.execute(
                f"SELECT holder FROM {HOLDERS} WHERE catalog = %s AND table_name = %s",
                (pg_settings.catalog_name, TABLE),
            )
            assert f'"pid": {os.getpid()}' in cur.fetchone()[0]


def test_a_writer_whose_connection_ended_stops_before_its_next_commit(pg_settings, server):
    with table_lock(pg_settings, TABLE, wait_seconds=0) as held:
        held.fence()
        admin = _admin(server)
        try:
            with admin.cursor() as cur:
                cur.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                    (f"tributary writer {TABLE}",),
                )
                assert cur.fetchall() == [(True,)]
        finally:
            admin.close()
        with pytest.raises(PipelineError) as lost:
            held.fence()
        message = str(lost.value)
        assert message.startswith("table bronze.events: this run lost its writer lock (its connection to the catalog")
        assert "stopped before its next commit; re-run it" in message and "\n" not in message
        # The server ended the lock with the connection: another writer takes the table at once.
        other = _hold(pg_settings)
        other.kill()
        other.wait()


def test_an_unreachable_catalog_database_is_one_line(tmp_path):
    port = free_port()
    s = replace(make_settings(tmp_path), catalog_uri=f"jdbc:postgresql://127.0.0.1:{port}/tributary?user=u&password=p")
    with pytest.raises(PipelineError) as failed, table_lock(s, TABLE, wait_seconds=0):
        pass
    message = str(failed.value)
    assert message.startswith("table bronze.events: cannot reach the catalog database for its writer lock (")
    assert "TRIBUTARY_CATALOG_URI" in message and "\n" not in message and "password=p" not in message
