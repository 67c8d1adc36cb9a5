"""The writer lock of a home with a PostgreSQL catalog: a session advisory lock on the catalog database.

The lock is held by the run's own connection (`pg_try_advisory_lock(catalog key, table key)`), so every host that
reaches the database sees it, with no shared disk, and the server releases it when the connection ends: a killed
run leaves nothing stale. The holder records itself in `tributary_writer_locks` beside its backend's pid; a waiter
names the holder only while that backend still holds the lock. The connection uses TCP keepalives and a user
timeout, so a lost network is noticed within seconds; `still_held` asks the server before each commit.

Keys are 31-bit hashes of the catalog's and the table's names: two tables whose keys collide only take turns.
"""

from __future__ import annotations

import hashlib
import json

import psycopg2
import psycopg2.errors

from infra.errors import PipelineError, first_line

HOLDERS = "tributary_writer_locks"
_CONNECT = {
    "connect_timeout": 10,
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 15_000,
}
_HELD = (
    "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid::bigint = %s "
    "AND objid::bigint = %s AND objsubid = 2 AND pid = {pid}"
)


def _key(name: str) -> int:
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=4).digest(), "big") & 0x7FFFFFFF


class PostgresLock:
    """An advisory lock on `table` of `catalog`, in the database at `dsn`."""

    def __init__(self, dsn: str, catalog: str, table: str) -> None:
        self._dsn, self.catalog, self.table = dsn, catalog, table
        self._keys = (_key(catalog), _key(table))
        self._connection: psycopg2.extensions.connection | None = None
        self._locked = False

    def _connect(self) -> psycopg2.extensions.connection:
        if self._connection is None or self._connection.closed:
            try:
                name = f"tributary writer {self.table}"[:63]
                connection = psycopg2.connect(self._dsn, application_name=name, **_CONNECT)
            except psycopg2.Error as exc:
                raise PipelineError(
                    f"table {self.table}: cannot reach the catalog database for its writer lock "
                    f"({first_line(exc)}); check TRIBUTARY_CATALOG_URI and that the database is up"
                ) from None
            connection.autocommit = True
            self._connection = connection
            self._create_holders()
        return self._connection

    def _create_holders(self) -> None:
        assert self._connection is not None
        try:
            with self._connection.cursor() as cur:
                cur.execute(
                    f"CREATE TABLE IF NOT EXISTS {HOLDERS} (catalog text NOT NULL, table_name text NOT NULL, "
                    "backend_pid integer NOT NULL, holder text NOT NULL, PRIMARY KEY (catalog, table_name))"
                )
        except (psycopg2.errors.UniqueViolation, psycopg2.errors.DuplicateTable):
            pass  # created by another process at the same moment

    def try_acquire(self) -> bool:
        """Take the lock if no other connection holds it."""
        with self._connect().cursor() as cur:
            cur.execute("SELECT pg_try_advisory_lock(%s, %s)", self._keys)
            row = cur.fetchone()
        self._locked = bool(row and row[0])
        return self._locked

    def holder(self) -> dict[str, object]:
        """The holder's record, if the backend that wrote it holds the lock now."""
        with self._connect().cursor() as cur:
            cur.execute(
                f"SELECT h.holder FROM {HOLDERS} h WHERE h.catalog = %s AND h.table_name = %s AND EXISTS ("
                + _HELD.format(pid="h.backend_pid")
                + ")",
                (self.catalog, self.table, *self._keys),
            )
            row = cur.fetchone()
        try:
            info = json.loads(row[0]) if row else {}
        except json.JSONDecodeError:
            return {}
        return info if isinstance(info, dict) else {}

    def record_holder(self, info: dict[str, object]) -> None:
        """Record the holder beside this connection's backend pid."""
        with self._connect().cursor() as cur:
            cur.execute(
                f"INSERT INTO {HOLDERS} (catalog, table_name, backend_pid, holder) VALUES (%s, %s, pg_backend_pid(), "
                "%s) ON CONFLICT (catalog, table_name) DO UPDATE SET backend_pid = EXCLUDED.backend_pid, "
                "holder = EXCLUDED.holder",
                (self.catalog, self.table, json.dumps(info)),
            )

    def still_held(self) -> str | None:
        """None while the server says this connection holds the lock; else what happened."""
        if self._connection is None or self._connection.closed or not self._locked:
            return "its connection to the catalog database is closed"
        try:
            with self._connection.cursor() as cur:
                cur.execute(_HELD.format(pid="pg_backend_pid()"), self._keys)
                if cur.fetchone() is None:
                    return "the catalog database no longer shows it held"
        except psycopg2.Error as exc:
            return f"its connection to the catalog database ended: {first_line(exc)}"
        return None

    def release(self) -> None:
        """Unlock and close the connection (closing alone would release it too)."""
        connection, self._connection = self._connection, None
        if connection is None or connection.closed:
            return
        try:
            if self._locked:
                with connection.cursor() as cur:
                    cur.execute(
                        f"DELETE FROM {HOLDERS} WHERE catalog = %s AND table_name = %s "
                        "AND backend_pid = pg_backend_pid()",
                        (self.catalog, self.table),
                    )
                    cur.execute("SELECT pg_advisory_unlock(%s, %s)", self._keys)
        except psycopg2.Error:
            pass  # the server ends the lock with the connection
        finally:
            self._locked = False
            connection.close()
