"""One served table brought to exactly the lakehouse table's current snapshot, in one PostgreSQL transaction.

The transaction takes a lock for the syncs of this database, reads the synced snapshot from `_tributary.synced`,
and, when the lakehouse has a newer one, loads that snapshot's rows (read without a JVM: pyiceberg or delta-rs,
through the SQL snapshot cache) into a temporary table, applies them and records the new snapshot, then commits.
A sync killed anywhere rolls back whole: readers keep seeing the previous snapshot (PostgreSQL's MVCC: a sync of
rows blocks no reader; one that adds a column or rebuilds the table makes queries of that table wait for its
commit), and the next sync applies the new one. A snapshot already synced writes nothing.

Applying: a table with keys changes only what differs (rows whose key left the table are deleted, new keys
inserted, changed rows updated, equal rows untouched); a table without keys is replaced in the same transaction.
A new column is added with ALTER TABLE; a dropped or retyped column refuses the sync (`tributary serve refresh`
rebuilds the served table).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from infra.errors import TributaryError, first_line
from infra.identifiers import validate_table_name
from infra.serving.config import ServeSettings
from infra.serving.pgtypes import copy_input, pg_type
from infra.serving.server import sync_connection
from infra.settings import Settings
from infra.sql.catalog import CatalogReader
from infra.sql.table_metadata import TableMetadata

if TYPE_CHECKING:
    import pyarrow as pa

STATE_SCHEMA = "_tributary"
# One lock for every sync into the database (an arbitrary constant): syncs take turns, readers never wait.
_SYNC_LOCK = 7_406_981


class ServeError(TributaryError):
    """A served table cannot follow its lakehouse table as it is."""


@dataclass(frozen=True)
class SyncReport:
    """What one sync did."""

    table: str
    snapshot: str
    rows: int
    mode: str  # created, incremental, replaced, refreshed or unchanged
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    seconds: float = 0.0
    lag_seconds: float | None = None  # from the snapshot's commit to this sync's commit

    @property
    def changed(self) -> bool:
        """Whether the served table changed."""
        return self.mode != "unchanged"


def _execute(cursor, statement, params=None) -> None:
    """Every statement of a sync goes through here or `_copy` (the crash tests count them)."""
    cursor.execute(statement, params)


def _copy(cursor, statement, rows: pa.Table) -> None:
    cursor.copy_expert(statement.as_string(cursor), copy_input(rows))


@dataclass(frozen=True)
class _Current:
    """The lakehouse table's current snapshot, as its metadata says (rows read only when needed)."""

    settings: Settings
    meta: TableMetadata

    @property
    def table_id(self) -> str:
        """The table's id and schema (a dropped or added column changes no Iceberg snapshot)."""
        return f"{self.meta.uuid}/schema-{self.meta.current_schema_id}"

    @property
    def snapshot(self) -> str:
        return "empty" if self.meta.current is None else str(self.meta.current.snapshot_id)

    @property
    def committed_at(self) -> datetime | None:
        return self.meta.current.committed_at if self.meta.current else None

    def rows(self) -> pa.Table:
        """The snapshot's rows (pyiceberg or delta-rs, through the SQL snapshot cache)."""
        import pyarrow.parquet as pq

        from infra.sql.local import SnapshotCache

        return pq.read_table(SnapshotCache(self.settings).file_for(self.meta, self.meta.current, as_of=False))


def _comment(field: pa.Field) -> str | None:
    meta = field.metadata or {}
    raw = meta.get(b"doc") or meta.get(b"comment")
    return raw.decode() if raw else None


def sync_table(
    settings: Settings,
    serve: ServeSettings,
    name: str,
    keys: tuple[str, ...] = (),
    description: str | None = None,
    refresh: bool = False,
) -> SyncReport | None:
    """Bring the served copy of table `name` to its current snapshot; None when nothing serves tables (no
    `TRIBUTARY_SERVE_URL` and the home's server is not running). `refresh` rebuilds the served table."""
    ns, short = validate_table_name(name)
    started = time.perf_counter()
    connection = sync_connection(settings.home, serve)
    if connection is None:
        return None
    import psycopg2
    from psycopg2 import sql

    target = sql.Identifier(ns, short)
    try:
        with connection, connection.cursor() as cur:
            _execute(cur, "SELECT pg_advisory_xact_lock(%s)", (_SYNC_LOCK,))
            _state_table(cur, serve)
            _execute(cur, f"SELECT table_id, snapshot, rows FROM {STATE_SCHEMA}.synced WHERE table_name = %s", (name,))
            synced = cur.fetchone()
            current = _Current(settings, CatalogReader(settings).metadata(name))
            table_id, snapshot, committed_at = current.table_id, current.snapshot, current.committed_at
            if synced is not None and synced[:2] == (table_id, snapshot) and not refresh:
                return SyncReport(name, snapshot, synced[2], "unchanged", seconds=_since(started))
            rows = current.rows()
            columns = [(f.name, pg_type(f.type)) for f in rows.schema]
            existing = _columns(cur, ns, short)
            if existing and not refresh:
                _follow_schema(cur, name, target, existing, columns)
            else:
                _create(cur, serve, ns, target, columns, keys, description, rows.schema)
            names = [c for c, _ in columns]
            present = [k for k in keys if k in names]
            counts = _apply(cur, target, names, present, rows, fresh=not existing or refresh)
            mode = "refreshed" if refresh else "created" if not existing else "incremental" if present else "replaced"
            _execute(
                cur,
                f"INSERT INTO {STATE_SCHEMA}.synced (table_name, table_id, snapshot, rows, committed_at, synced_at) "
                "VALUES (%s, %s, %s, %s, %s, now()) ON CONFLICT (table_name) DO UPDATE SET table_id = "
                "EXCLUDED.table_id, snapshot = EXCLUDED.snapshot, rows = EXCLUDED.rows, committed_at = "
                "EXCLUDED.committed_at, synced_at = EXCLUDED.synced_at",
                (name, table_id, snapshot, rows.num_rows, committed_at),
            )
        lag = (datetime.now(UTC) - committed_at).total_seconds() if committed_at else None
        return SyncReport(name, snapshot, rows.num_rows, mode, *counts, seconds=_since(started), lag_seconds=lag)
    except psycopg2.Error as exc:
        raise ServeError(f"sync of served table {name} failed, nothing changed: {first_line(exc)}") from None
    finally:
        connection.close()


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 3)


def _state_table(cur, serve: ServeSettings) -> None:
    """Create `_tributary.synced` once (a sync with nothing new then only reads)."""
    _execute(cur, "SELECT to_regclass(%s)", (f"{STATE_SCHEMA}.synced",))
    if cur.fetchone()[0] is not None:
        return
    _execute(cur, f"CREATE SCHEMA IF NOT EXISTS {STATE_SCHEMA}")
    _execute(
        cur,
        f"CREATE TABLE IF NOT EXISTS {STATE_SCHEMA}.synced (table_name text PRIMARY KEY, table_id text NOT NULL, "
        "snapshot text NOT NULL, rows bigint NOT NULL, committed_at timestamptz, synced_at timestamptz NOT NULL)",
    )
    _grant_schema(cur, serve, STATE_SCHEMA)


def _grant_schema(cur, serve: ServeSettings, schema: str) -> None:
    """Analysts may read every table of `schema`, now and later (when their role exists here)."""
    from psycopg2 import sql

    _execute(cur, "SELECT 1 FROM pg_roles WHERE rolname = %s", (serve.analyst,))
    if cur.fetchone() is None:
        return
    who, where = sql.Identifier(serve.analyst), sql.Identifier(schema)
    _execute(cur, sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(where, who))
    _execute(cur, sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(where, who))
    _execute(cur, sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA {} GRANT SELECT ON TABLES TO {}").format(where, who))


def _columns(cur, ns: str, table: str) -> list[tuple[str, str]]:
    _execute(
        cur,
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a JOIN pg_class c ON c.oid = "
        "a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s AND "
        "a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
        (ns, table),
    )
    return list(cur.fetchall())


def _follow_schema(cur, name: str, target, existing: list[tuple[str, str]], columns: list[tuple[str, str]]) -> None:
    from psycopg2 import sql

    have, want = dict(existing), dict(columns)
    for column, kind in existing:
        if column not in want:
            problem = f"column {column} was dropped from {name}"
        elif want[column] != kind:
            problem = f"column {column} of {name} changed type ({kind} -> {want[column]})"
        else:
            continue
        raise ServeError(
            f"served table {name} cannot follow: {problem}; rebuild it with 'tributary serve refresh {name}'"
        )
    for column, kind in columns:
        if column not in have:
            _execute(cur, sql.SQL("ALTER TABLE {} ADD COLUMN {} " + kind).format(target, sql.Identifier(column)))


def _create(cur, serve, ns, target, columns, keys, description, schema) -> None:
    from psycopg2 import sql

    _execute(cur, sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(ns)))
    _execute(cur, sql.SQL("DROP TABLE IF EXISTS {}").format(target))
    # Types come from `pg_type` (fixed words and numbers), names are quoted identifiers.
    body = sql.SQL(", ").join(sql.SQL("{} " + kind).format(sql.Identifier(c)) for c, kind in columns)
    _execute(cur, sql.SQL("CREATE TABLE {} ({})").format(target, body))
    present = [k for k in keys if k in dict(columns)]
    if present:
        index = sql.Identifier(f"{target.strings[1]}__tributary_keys"[:63])
        key_list = sql.SQL(", ").join(sql.Identifier(k) for k in present)
        _execute(cur, sql.SQL("CREATE UNIQUE INDEX {} ON {} ({}) NULLS NOT DISTINCT").format(index, target, key_list))
    if description:
        _execute(cur, sql.SQL("COMMENT ON TABLE {} IS %s").format(target), (description,))
    for field in schema:
        comment = _comment(field)
        if comment:
            column = sql.SQL("{}.{}").format(target, sql.Identifier(field.name))
            _execute(cur, sql.SQL("COMMENT ON COLUMN {} IS %s").format(column), (comment,))
    _grant_schema(cur, serve, ns)


def _apply(cur, target, names: list[str], keys: list[str], rows: pa.Table, fresh: bool) -> tuple[int, int, int]:
    """Make the served table hold `rows`: (inserted, updated, deleted)."""
    from psycopg2 import sql

    cols = sql.SQL(", ").join(sql.Identifier(c) for c in names)
    copy = sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT csv)")
    if fresh:
        _copy(cur, copy.format(target, cols), rows)
        return rows.num_rows, 0, 0
    stage = sql.Identifier("_tributary_stage")
    _execute(cur, sql.SQL("CREATE TEMP TABLE {} (LIKE {}) ON COMMIT DROP").format(stage, target))
    _copy(cur, copy.format(stage, cols), rows)
    if not keys:
        _execute(cur, sql.SQL("DELETE FROM {}").format(target))
        deleted = cur.rowcount
        _execute(cur, sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {}").format(target, cols, cols, stage))
        return cur.rowcount, 0, deleted
    _execute(cur, sql.SQL("ANALYZE {}").format(stage))  # row counts, so that the planner hashes the key joins

    def compared(op: str) -> sql.Composable:
        return sql.SQL(" AND ").join(sql.SQL("s.{k} " + op + " t.{k}").format(k=sql.Identifier(k)) for k in keys)

    def null_key(alias: str) -> sql.Composable:
        return sql.SQL(" OR ").join(sql.SQL(alias + ".{} IS NULL").format(sql.Identifier(k)) for k in keys)

    # Rows whose key left the table. Keys compared with `=` join by hashing; the (few) rows with a NULL key part
    # are compared NULL-safely among themselves.
    deleted = 0
    for own, among, op in (
        (sql.SQL("NOT"), sql.SQL("true"), "="),
        (sql.SQL(""), null_key("s"), "IS NOT DISTINCT FROM"),
    ):
        _execute(
            cur,
            sql.SQL("DELETE FROM {} t WHERE {} ({}) AND NOT EXISTS (SELECT 1 FROM {} s WHERE ({}) AND {})").format(
                target, own, null_key("t"), stage, among, compared(op)
            ),
        )
        deleted += cur.rowcount
    values = [c for c in names if c not in keys]
    if values:
        assignments = sql.SQL(", ").join(sql.SQL("{c} = EXCLUDED.{c}").format(c=sql.Identifier(c)) for c in values)
        mine = sql.SQL(", ").join(sql.SQL("t.{}").format(sql.Identifier(c)) for c in values)
        theirs = sql.SQL(", ").join(sql.SQL("EXCLUDED.{}").format(sql.Identifier(c)) for c in values)
        update = sql.SQL("UPDATE SET {} WHERE ROW({}) IS DISTINCT FROM ROW({})").format(assignments, mine, theirs)
    else:
        update = sql.SQL("NOTHING")
    key_list = sql.SQL(", ").join(sql.Identifier(k) for k in keys)
    # Equal rows are skipped by the WHERE (no new row version); xmax = 0 marks a row this statement inserted.
    _execute(
        cur,
        sql.SQL("INSERT INTO {} AS t ({}) SELECT {} FROM {} ON CONFLICT ({}) DO {} RETURNING (t.xmax = 0)").format(
            target, cols, cols, stage, key_list, update
        ),
    )
    returned = [row[0] for row in cur.fetchall()]
    inserted = sum(returned)
    return inserted, len(returned) - inserted, deleted


def synced_state(settings: Settings, serve: ServeSettings) -> dict[str, tuple[str, str, int, datetime]] | None:
    """table -> (table id, snapshot, rows, synced at) of every synced table; None when nothing serves tables."""
    import psycopg2

    connection = sync_connection(settings.home, serve)
    if connection is None:
        return None
    try:
        with connection, connection.cursor() as cur:
            cur.execute("SELECT to_regclass(%s)", (f"{STATE_SCHEMA}.synced",))
            if cur.fetchone()[0] is None:
                return {}
            cur.execute(f"SELECT table_name, table_id, snapshot, rows, synced_at FROM {STATE_SCHEMA}.synced")
            return {name: (tid, snap, rows, at) for name, tid, snap, rows, at in cur.fetchall()}
    except psycopg2.Error as exc:
        raise ServeError(f"cannot read the served tables' state: {first_line(exc)}") from None
    finally:
        connection.close()
