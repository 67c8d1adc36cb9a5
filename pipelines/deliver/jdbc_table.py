"""A PostgreSQL table as a sink's destination: the rows and the sink's position in one database transaction.

The transaction takes the sink's advisory lock, checks that `_tributary.sink_positions` still holds the position
the run started from, stages the rows with COPY, inserts them (with keys: inserts or updates each key, and deletes
the keys that left the table) and records the new position; then commits. A run killed anywhere before the
commit leaves the table as it was (PostgreSQL rolls the transaction back), so the next run delivers the same
changes once. The table is created (with a unique index on the keys) when it does not exist.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

from infra.errors import ConfigError, first_line
from infra.serving.pgtypes import copy_input, pg_type
from pipelines.spec.delivery import Delivery, Destination, Position, SinkError

if TYPE_CHECKING:
    import pyarrow as pa

    from infra.settings import Settings

POSITIONS = "_tributary.sink_positions"
_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


def _connect_arguments(url: str) -> dict[str, str]:
    """psycopg2 arguments of a `postgresql://user:password@host:port/db` or `jdbc:postgresql://host:port/db?user=..`
    URL (ConfigError for any other)."""
    plain = url.removeprefix("jdbc:")
    parts = urlsplit(plain)
    if parts.scheme.split("+")[0] not in ("postgresql", "postgres") or not parts.hostname or not parts.path.strip("/"):
        raise ConfigError(
            "a sink's database URL must be postgresql://user:password@host:port/database (or the jdbc:postgresql "
            "form); other databases are not supported yet"
        )
    args = {"host": parts.hostname, "port": str(parts.port or 5432), "dbname": parts.path.strip("/")}
    if parts.username:
        args["user"] = parts.username
    if parts.password:
        args["password"] = parts.password
    args.update(dict(parse_qsl(parts.query)))
    return args


@dataclass(frozen=True)
class JdbcTable(Destination):
    """`schema.table` in the PostgreSQL database at `url` (its password is never printed)."""

    url: str = field(repr=False)
    table: str
    keys: tuple[str, ...] = ()
    kind = "postgres"

    def __post_init__(self) -> None:
        _connect_arguments(self.url)  # a bad URL is refused where the sink is declared
        parts = self.table.split(".")
        if len(parts) > 2 or not all(_NAME.match(p) for p in parts):
            raise ConfigError(f"sink table {self.table!r} is not [schema.]table in lower-case letters, digits and _")

    @property
    def qualified(self) -> tuple[str, str]:
        """(schema, table); `public` when the table names none."""
        parts = self.table.split(".")
        return (parts[0], parts[1]) if len(parts) == 2 else ("public", parts[0])

    def describe(self) -> str:
        args = _connect_arguments(self.url)
        return f"PostgreSQL table {'.'.join(self.qualified)} at {args['host']}:{args['port']}/{args['dbname']}"

    def with_keys(self, keys: tuple[str, ...]) -> JdbcTable:
        return self if self.keys else JdbcTable(self.url, self.table, keys)

    def _connection(self, sink: str):
        import psycopg2

        try:
            return psycopg2.connect(connect_timeout=10, **_connect_arguments(self.url))
        except psycopg2.Error as exc:
            raise SinkError(
                f"sink {sink}: cannot reach {self.describe()} ({first_line(exc)}); nothing was delivered: start the "
                "database or fix the sink's URL, and the next run delivers what was missed"
            ) from None

    def position(self, settings: Settings, sink: str) -> Position | None:
        import psycopg2

        connection = self._connection(sink)
        try:
            with connection, connection.cursor() as cur:
                cur.execute("SELECT to_regclass(%s)", (POSITIONS,))
                if cur.fetchone()[0] is None:
                    return None
                cur.execute(f"SELECT table_id, snapshot FROM {POSITIONS} WHERE sink = %s", (sink,))
                row = cur.fetchone()
        except psycopg2.Error as exc:
            raise SinkError(
                f"sink {sink}: reading its position in {self.describe()} failed: {first_line(exc)}"
            ) from None
        finally:
            connection.close()
        return None if row is None else Position(row[0], int(row[1]))

    def deliver(self, settings: Settings, delivery: Delivery) -> tuple[int, int]:
        import psycopg2

        rows = delivery.rows.toArrow()
        deleted = delivery.deleted.toArrow() if delivery.deleted is not None else None
        connection = self._connection(delivery.sink)
        try:
            with connection, connection.cursor() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (zlib.crc32(delivery.sink.encode()),))
                cur.execute(
                    "CREATE SCHEMA IF NOT EXISTS _tributary; CREATE TABLE IF NOT EXISTS "
                    f"{POSITIONS} (sink text PRIMARY KEY, table_name text NOT NULL, table_id text NOT NULL, "
                    "snapshot bigint NOT NULL, rows bigint NOT NULL, delivered_at timestamptz NOT NULL)"
                )
                cur.execute(f"SELECT table_id, snapshot FROM {POSITIONS} WHERE sink = %s FOR UPDATE", (delivery.sink,))
                found = cur.fetchone()
                if (None if found is None else Position(found[0], int(found[1]))) != delivery.since:
                    raise SinkError(
                        f"sink {delivery.sink}: {self.describe()} received other changes while this run read its "
                        "own (another run of the sink?); nothing was delivered: run it again"
                    )
                written = self._write(cur, rows, deleted)
                cur.execute(
                    f"INSERT INTO {POSITIONS} VALUES (%s, %s, %s, %s, %s, now()) ON CONFLICT (sink) DO UPDATE SET "
                    "table_name = EXCLUDED.table_name, table_id = EXCLUDED.table_id, snapshot = EXCLUDED.snapshot, "
                    f"rows = {POSITIONS}.rows + EXCLUDED.rows, delivered_at = EXCLUDED.delivered_at",
                    (delivery.sink, delivery.table, delivery.until.table_id, delivery.until.snapshot, written[0]),
                )
        except psycopg2.Error as exc:
            raise SinkError(
                f"sink {delivery.sink}: delivering to {self.describe()} failed, nothing was delivered: "
                f"{first_line(exc)}"
            ) from None
        finally:
            connection.close()
        return written

    def _write(self, cur, rows: pa.Table, deleted: pa.Table | None) -> tuple[int, int]:
        from psycopg2 import sql

        schema, name = self.qualified
        target = sql.Identifier(schema, name)
        columns = [(f.name, pg_type(f.type)) for f in rows.schema]
        cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        body = sql.SQL(", ").join(sql.SQL("{} " + kind).format(sql.Identifier(c)) for c, kind in columns)
        cur.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(target, body))
        if self.keys:
            index = sql.Identifier(f"{name}__tributary_keys"[:63])
            key_list = sql.SQL(", ").join(sql.Identifier(k) for k in self.keys)
            cur.execute(sql.SQL("CREATE UNIQUE INDEX IF NOT EXISTS {} ON {} ({})").format(index, target, key_list))
        names = sql.SQL(", ").join(sql.Identifier(c) for c, _ in columns)
        written = 0
        if rows.num_rows:
            stage = sql.Identifier("_tributary_rows")
            cur.execute(sql.SQL("CREATE TEMP TABLE {} ({}) ON COMMIT DROP").format(stage, body))
            copy = sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT csv)").format(stage, names)
            cur.copy_expert(copy.as_string(cur), copy_input(rows))
            insert = sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {}").format(target, names, names, stage)
            values = [c for c, _ in columns if c not in self.keys]
            if self.keys:
                keys = sql.SQL(", ").join(sql.Identifier(k) for k in self.keys)
                sets = sql.SQL(", ").join(sql.SQL("{c} = EXCLUDED.{c}").format(c=sql.Identifier(c)) for c in values)
                action = sql.SQL("UPDATE SET {}").format(sets) if values else sql.SQL("NOTHING")
                insert = sql.SQL("{} ON CONFLICT ({}) DO {}").format(insert, keys, action)
            cur.execute(insert)
            written = cur.rowcount
        gone = 0
        if deleted is not None and deleted.num_rows:
            stage = sql.Identifier("_tributary_gone")
            key_types = sql.SQL(", ").join(
                sql.SQL("{} " + pg_type(f.type)).format(sql.Identifier(f.name)) for f in deleted.schema
            )
            cur.execute(sql.SQL("CREATE TEMP TABLE {} ({}) ON COMMIT DROP").format(stage, key_types))
            key_names = sql.SQL(", ").join(sql.Identifier(k) for k in deleted.column_names)
            copy = sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT csv)").format(stage, key_names)
            cur.copy_expert(copy.as_string(cur), copy_input(deleted))
            match = sql.SQL(" AND ").join(
                sql.SQL("t.{k} IS NOT DISTINCT FROM g.{k}").format(k=sql.Identifier(k)) for k in deleted.column_names
            )
            cur.execute(sql.SQL("DELETE FROM {} t USING {} g WHERE {}").format(target, stage, match))
            gone = cur.rowcount
        return written, gone

    def held_rows(self, settings: Settings, sink: str) -> int | None:
        """The rows the destination table holds now (None before the first delivery)."""
        import psycopg2
        from psycopg2 import sql

        connection = self._connection(sink)
        try:
            with connection, connection.cursor() as cur:
                cur.execute("SELECT to_regclass(%s)", (".".join(self.qualified),))
                if cur.fetchone()[0] is None:
                    return None
                cur.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(*self.qualified)))
                return int(cur.fetchone()[0])
        except psycopg2.Error as exc:
            raise SinkError(f"sink {sink}: counting the rows of {self.describe()} failed: {first_line(exc)}") from None
        finally:
            connection.close()
