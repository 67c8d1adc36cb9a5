"""Read-only SQL for analysts: Iceberg tables scanned by pyiceberg, queried by DuckDB, no JVM.

Tables are referenced as `gold.daily_revenue`. Only the tables a query names are scanned. Start-up time
matters here (the command is run once per query), so the fast path imports only the standard library and
DuckDB: the catalog is read by `infra.sql.catalog`, and each scanned snapshot is kept as a Parquet file under
`<home>/sql-cache`, keyed by table UUID, snapshot id and schema id. A snapshot never changes, so a cached
file is never stale; only a snapshot seen for the first time pays for pyiceberg + pyarrow (an exact scan,
delete files included). pyspark is imported only by `--engine spark` (`infra.sql.spark_engine`).

Only queries are accepted (`check_read_only`), and the DuckDB connection is locked down so that a query can
read nothing but the snapshot cache: external access off, the cache as the only allowed directory (DuckDB's
spill folder is a private folder inside it, not `<cwd>/.tmp`), configuration locked.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterable
from pathlib import Path

import duckdb

from infra.errors import TributaryError, first_line
from infra.identifiers import validate_table_name
from infra.object_store import is_object_url
from infra.settings import Settings
from infra.sql.catalog import (
    CatalogReader,
    QueryRefused,
    QueryResult,
    UnknownTable,
    _unquote_name,
    history,
    meta_command,
    unknown_table,
    validate_as_of,
)
from infra.sql.table_metadata import Snapshot, TableMetadata

ENGINES = ("duckdb", "spark")
READ_ONLY = (
    "tributary sql is read-only for analysts and runs queries only (SELECT/WITH/VALUES, SHOW TABLES, "
    "DESCRIBE <table>, SHOW HISTORY <table>); tables are written by the pipelines"
)
CACHE_KEEP_PER_TABLE = 3  # cached snapshot files kept per table (the newest, by last use)
__all__ = ["CatalogReader", "QueryResult", "UnknownTable", "history"]


def settings_env(settings: Settings) -> dict[str, str]:
    """`TRIBUTARY_*` variables that make a `tributary` subprocess use the same data, catalog and Spark settings."""
    env = {
        "TRIBUTARY_HOME": str(settings.home),
        "TRIBUTARY_LANDING": str(settings.landing),
        "TRIBUTARY_WAREHOUSE": settings.warehouse_url or str(settings.warehouse),
        "TRIBUTARY_CHECKPOINTS": str(settings.checkpoints),
        "TRIBUTARY_CATALOG_DB": str(settings.catalog_db),
        "TRIBUTARY_CATALOG_NAME": settings.catalog_name,
        "TRIBUTARY_TABLE_FORMAT": settings.table_format,
        "TRIBUTARY_SPARK_MASTER": settings.spark_master,
        "TRIBUTARY_SHUFFLE_PARTITIONS": str(settings.shuffle_partitions),
        "TRIBUTARY_DRIVER_MEMORY": settings.driver_memory,
        "TRIBUTARY_JAR_CACHE": str(settings.jar_cache),
    }
    if settings.catalog_uri:
        env["TRIBUTARY_CATALOG_URI"] = settings.catalog_uri
    if settings.warehouse_url:
        env.update(settings.object_store.environment())
    if settings.spark_conf:
        env["TRIBUTARY_SPARK_CONF"] = ",".join(f"{k}={v}" for k, v in settings.spark_conf)
    return env


# ------------------------------------------------------------------------------------ statements


def check_read_only(sql: str) -> None:
    """Raise QueryRefused unless `sql` is exactly one query (SELECT, WITH, VALUES, FROM, DESCRIBE ...).

    Uses DuckDB's own parser: DDL, DML, CALL, SET, ATTACH, COPY, PRAGMA, INSTALL/LOAD, EXPORT and the like
    are refused by statement type, never by guessing from keywords.
    """
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        hint = ""
        if re.search(r"\bfor\s+(version|timestamp|system_time)\s+as\s+of\b", sql, re.I):
            hint = " (locally, time travel is --as-of <snapshot id or timestamp>; FOR ... AS OF is Spark syntax)"
        raise TributaryError(f"cannot parse the query: {first_line(exc)}{hint}") from exc
    if not statements:
        raise QueryRefused("empty query: nothing to run")
    if len(statements) > 1:
        raise QueryRefused(f"one statement at a time please ({len(statements)} given)")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        word = re.match(r"\s*([A-Za-z]+)", sql)
        raise QueryRefused(f"{(word.group(1) if word else kind.name).upper()} statements are refused: {READ_ONLY}")


def referenced_tables(sql: str, known: Iterable[str]) -> set[str]:
    """The known `namespace.table` names that occur in `sql` as qualified identifiers.

    DuckDB's tokenizer separates identifiers from string literals and comments, so `'gold.x'` or
    `-- gold.x` do not count. An alias that happens to look like a table name only costs an extra scan.
    """
    known_set = set(known)
    tokens = duckdb.tokenize(sql)
    texts: list[str | None] = []
    for i, (start, kind) in enumerate(tokens):
        end = tokens[i + 1][0] if i + 1 < len(tokens) else len(sql)
        text = sql[start:end].strip()
        if kind in (duckdb.token_type.identifier, duckdb.token_type.keyword):
            texts.append(_unquote_name(text))
        elif text == ".":
            texts.append(".")
        else:
            texts.append(None)
    found = set()
    for i in range(len(texts) - 2):
        first, dot, second = texts[i], texts[i + 1], texts[i + 2]
        if first and second and dot == "." and first != "." and second != ".":
            name = f"{first}.{second}"
            if name in known_set:
                found.add(name)
    return found


# ------------------------------------------------------------------------------------------ engine


class SnapshotCache:
    """Parquet copies of table snapshots, keyed by table UUID, snapshot id and read schema."""

    def __init__(self, settings: Settings):
        self.store = settings.object_store
        root = settings.home / "sql-cache"
        try:
            root.mkdir(parents=True, exist_ok=True)
            probe = root / f".probe-{os.getpid()}"
            probe.touch()
            probe.unlink()
        except OSError:  # a read-only home: keep the files for this process only
            root = Path(tempfile.mkdtemp(prefix="tributary-sql-"))
            import atexit

            atexit.register(shutil.rmtree, root, True)
        self.root = root.resolve()

    def file_for(self, meta: TableMetadata, snapshot: Snapshot | None, as_of: bool) -> Path:
        """The Parquet file holding `snapshot` of the table, scanning it with pyiceberg if not cached yet.

        The current snapshot is read with the current schema, an older one with its own schema (as Spark does).
        """
        schema_id = meta.current_schema_id
        if as_of and snapshot is not None and snapshot.schema_id in meta.schemas:
            schema_id = snapshot.schema_id
        snap_key = snapshot.snapshot_id if snapshot is not None else "empty"
        folder = self.root / meta.name
        target = folder / f"{meta.uuid}-{snap_key}-schema{schema_id}.parquet"
        if target.is_file():
            with contextlib.suppress(OSError):
                os.utime(target)  # mark as recently used, so pruning keeps it
            return target
        folder.mkdir(parents=True, exist_ok=True)
        # The expensive imports happen only here, on a cache miss.
        import pyarrow.parquet as pq

        if meta.format == "delta":
            import pyarrow as pa
            from deltalake import DeltaTable

            version = snapshot.snapshot_id if as_of and snapshot is not None else None
            arrow = pa.table(DeltaTable(meta.location, version=version).to_pyarrow_table())
        else:
            from pyiceberg.table import StaticTable

            store = self.store if is_object_url(meta.location) else None
            table = StaticTable.from_metadata(meta.location, store.pyiceberg_properties() if store else {})
            scan = table.scan(snapshot_id=snapshot.snapshot_id) if as_of and snapshot is not None else table.scan()
            arrow = scan.to_arrow()
        staged = folder / f".{target.name}.{os.getpid()}.tmp"
        pq.write_table(arrow, staged)
        staged.replace(target)
        self._prune(folder, keep=target)
        return target

    def _prune(self, folder: Path, keep: Path) -> None:
        files = sorted(folder.glob("*.parquet"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in files[CACHE_KEEP_PER_TABLE:]:
            if old != keep:
                old.unlink(missing_ok=True)


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class LocalEngine:
    """One DuckDB connection that answers queries over lakehouse tables; reusable across queries."""

    def __init__(self, settings: Settings, as_of: str | None = None):
        self.settings = settings
        self.as_of = validate_as_of(as_of)
        self.catalog = CatalogReader(settings)
        self.cache = SnapshotCache(settings)
        self._con: duckdb.DuckDBPyConnection | None = None
        self._spill: Path | None = None
        self._views: dict[str, Path] = {}
        self._schemas: set[str] = set()

    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            con = duckdb.connect(":memory:")
            con.execute("SET TimeZone = 'UTC'")  # Spark's session time zone in Tributary
            # Also accept catalog-qualified names, as Spark does (tributary.gold.daily_revenue), unless the catalog
            # is named like a namespace: `ops.run_log` would then be ambiguous to DuckDB.
            if self.settings.catalog_name not in {"ops", *(t.split(".")[0] for t in self.catalog.tables())}:
                try:
                    con.execute(f"ATTACH ':memory:' AS {self.settings.catalog_name}")
                    con.execute(f"USE {self.settings.catalog_name}")
                except duckdb.Error:
                    pass  # a catalog name DuckDB reserves (memory, system, temp): plain names still work
            # Lock the connection down: a query may read the cached snapshot files and nothing else. DuckDB also
            # allows its temp (spill) folder, by default <cwd>/.tmp: give it a private, not yet existing folder
            # inside the cache instead (DuckDB creates it only to spill and removes it on close).
            con.execute("SET python_enable_replacements = false")
            self._spill = self.cache.root / f".spill-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            con.execute(f"SET temp_directory = {_sql_string(str(self._spill))}")
            con.execute(f"SET allowed_directories = [{_sql_string(str(self.cache.root) + os.sep)}]")
            con.execute("SET enable_external_access = false")
            con.execute("SET lock_configuration = true")
            self._con = con
        return self._con

    def _schema(self, namespace: str) -> None:
        ns, _ = validate_table_name(f"{namespace}.t")  # matches ^[a-z][a-z0-9_]*$: safe as an identifier
        if ns not in self._schemas:
            self._connection().execute(f"CREATE SCHEMA IF NOT EXISTS {ns}")
            self._schemas.add(ns)

    def _bind(self, name: str, path: Path) -> None:
        con = self._connection()
        ns, table = validate_table_name(name)  # both parts match ^[a-z][a-z0-9_]*$: safe as identifiers
        self._schema(ns)
        if self._views.get(name) != path:
            con.execute(f"CREATE OR REPLACE VIEW {ns}.{table} AS SELECT * FROM read_parquet({_sql_string(str(path))})")
            self._views[name] = path

    def query(self, sql: str) -> QueryResult:
        """Run one read-only query (or SHOW TABLES / DESCRIBE / SHOW HISTORY) and return its rows."""
        answered = meta_command(self.catalog, sql, self.as_of)
        if answered is not None:
            return answered
        check_read_only(sql)
        locations = self.catalog.table_locations()
        con = self._connection()
        for ns in sorted({n.split(".")[0] for n in locations}):
            self._schema(ns)  # so that gold.missing is reported as a missing table, not a missing schema
        for name in sorted(referenced_tables(sql, locations)):
            meta = self.catalog.metadata(name, locations)
            snapshot = meta.snapshot_as_of(self.as_of) if self.as_of else meta.current
            self._bind(name, self.cache.file_for(meta, snapshot, as_of=bool(self.as_of)))
        try:
            cursor = con.execute(sql)
            rows = cursor.fetchall()
        except duckdb.CatalogException as exc:
            raise _catalog_error(exc, sql, list(locations)) from exc
        except duckdb.PermissionException as exc:  # the lock-down at work: a file outside the snapshot cache
            raise QueryRefused(
                f"file access is refused: tributary sql reads lakehouse tables only ({first_line(exc)})"
            ) from exc
        except duckdb.Error as exc:
            raise TributaryError(f"query failed: {first_line(exc)}") from exc
        columns = tuple(d[0] for d in cursor.description or ())
        return QueryResult(columns, rows)

    def close(self) -> None:
        """Close the DuckDB connection."""
        if self._con is not None:
            self._con.close()
            self._con = None
            self._views.clear()
            self._schemas.clear()
        if self._spill is not None:
            shutil.rmtree(self._spill, ignore_errors=True)
            self._spill = None


def _catalog_error(exc: duckdb.Error, sql: str, tables: list[str]) -> TributaryError:
    message = first_line(exc)
    match = re.search(r'Table with name "?([\w.]+?)"? does not exist', message)
    if not match:
        return TributaryError(f"query failed: {message}")
    missing = match.group(1).lower()
    if "." not in missing:  # DuckDB names only the table part: find how the query qualified it
        qualified = re.search(rf"([A-Za-z_]\w*)\s*\.\s*{re.escape(missing)}\b", sql, re.I)
        if qualified:
            missing = f"{qualified.group(1).lower()}.{missing}"
    error = unknown_table(missing, tables)
    if "." not in missing:
        error = UnknownTable(f"{error} (qualify tables with their namespace, e.g. gold.daily_revenue)")
    return error
