"""Read-only SQL for analysts: Iceberg tables scanned by pyiceberg, queried by DuckDB, no JVM.

Tables are referenced as `gold.daily_revenue`. Only the tables a query names are scanned. Start-up time
matters here (the command is run once per query), so the fast path imports only the standard library and
DuckDB: the catalog database is read with `sqlite3`, table metadata with `json`, and each scanned snapshot is
kept as a Parquet file under `<home>/sql-cache`, keyed by table UUID, snapshot id and schema id. A snapshot
never changes, so a cached file is never stale; only a snapshot seen for the first time pays for
pyiceberg + pyarrow (an exact scan, delete files included). pyspark is imported only by `--engine spark`.

Only queries are accepted (`check_read_only`), and the DuckDB connection is locked down so that a query can
read nothing but the cached table files.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote, urlparse

import duckdb

from infra.errors import ConfigError, TributaryError
from infra.identifiers import validate_table_name
from infra.settings import Settings

ENGINES = ("duckdb", "spark")
READ_ONLY = (
    "tributary sql is read-only for analysts and runs queries only (SELECT/WITH/VALUES, SHOW TABLES, "
    "DESCRIBE <table>, SHOW HISTORY <table>); tables are written by the pipelines"
)
CACHE_KEEP_PER_TABLE = 3  # cached snapshot files kept per table (the newest, by last use)


class QueryRefused(TributaryError):
    """A statement that is not a read-only query."""


class UnknownTable(TributaryError):
    """A query or command names a table the catalog does not have."""


@dataclass(frozen=True)
class QueryResult:
    """Column names and rows (Python values; timestamps are timezone-aware UTC)."""

    columns: tuple[str, ...]
    rows: list[tuple]


@dataclass(frozen=True)
class Snapshot:
    """One Iceberg snapshot as its table metadata records it."""

    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int
    schema_id: int | None
    summary: dict[str, str]

    @property
    def committed_at(self) -> datetime:
        """Commit time, UTC."""
        return datetime.fromtimestamp(self.timestamp_ms / 1000, tz=UTC)

    @property
    def operation(self) -> str:
        """append, overwrite, delete or replace."""
        return self.summary.get("operation", "")

    def count(self, key: str) -> int | None:
        """A numeric summary entry such as `total-records`, or None if absent."""
        value = self.summary.get(key)
        return int(value) if value is not None and value.lstrip("-").isdigit() else None


@dataclass(frozen=True)
class TableMetadata:
    """The parts of an Iceberg `metadata.json` the SQL command needs."""

    name: str
    location: str
    uuid: str
    current_snapshot_id: int | None
    current_schema_id: int
    schemas: dict[int, list[dict]]
    snapshots: dict[int, Snapshot]
    log: tuple[tuple[int, int], ...]  # (timestamp_ms, snapshot_id): the main branch's history, oldest first

    @classmethod
    def parse(cls, name: str, location: str, doc: dict) -> TableMetadata:
        """Build from the parsed JSON of a table's metadata file."""
        snapshots = {
            int(s["snapshot-id"]): Snapshot(
                snapshot_id=int(s["snapshot-id"]),
                parent_id=s.get("parent-snapshot-id"),
                timestamp_ms=int(s["timestamp-ms"]),
                schema_id=s.get("schema-id"),
                summary=dict(s.get("summary", {})),
            )
            for s in doc.get("snapshots", [])
        }
        current = doc.get("current-snapshot-id")
        if current is not None and int(current) < 0:  # format v1 writes -1 for "no snapshot"
            current = None
        return cls(
            name=name,
            location=location,
            uuid=str(doc.get("table-uuid", "")),
            current_snapshot_id=int(current) if current is not None else None,
            current_schema_id=int(doc.get("current-schema-id", 0)),
            schemas={int(s.get("schema-id", 0)): list(s["fields"]) for s in doc.get("schemas", [])},
            snapshots=snapshots,
            log=tuple((int(e["timestamp-ms"]), int(e["snapshot-id"])) for e in doc.get("snapshot-log", [])),
        )

    @property
    def current(self) -> Snapshot | None:
        """The current snapshot, or None for a table without data yet."""
        return self.snapshots.get(self.current_snapshot_id) if self.current_snapshot_id is not None else None

    def snapshot_as_of(self, as_of: str) -> Snapshot:
        """The snapshot for `--as-of`: a snapshot id, or the one current at an ISO timestamp (as Spark does)."""
        text = as_of.strip()
        if re.fullmatch(r"-?\d+", text):
            snap = self.snapshots.get(int(text))
            if snap is None:
                known = ", ".join(str(s) for s in sorted(self.snapshots, key=lambda i: self.snapshots[i].timestamp_ms))
                raise TributaryError(
                    f"table {self.name} has no snapshot {text} (its snapshots: {known or 'none'}); "
                    f"see 'tributary history {self.name}'"
                )
            return snap
        at_ms = parse_timestamp_ms(text)
        chosen = None
        for ts, snapshot_id in self.log:
            if ts <= at_ms and snapshot_id in self.snapshots:
                chosen = snapshot_id
        if chosen is None:
            first = min((s.committed_at for s in self.snapshots.values()), default=None)
            since = f"its first snapshot was committed at {first.isoformat()}" if first else "it has no snapshots"
            raise TributaryError(f"table {self.name} has no snapshot at or before {text} ({since})")
        return self.snapshots[chosen]

    def fields(self, schema_id: int | None = None) -> list[dict]:
        """Top-level fields of a schema (default: the current one)."""
        return self.schemas.get(self.current_schema_id if schema_id is None else schema_id, [])


def parse_timestamp_ms(text: str) -> int:
    """Milliseconds since the epoch for an ISO-8601 timestamp or date; naive values are UTC."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ConfigError(
            f"--as-of {text!r} is neither a snapshot id nor an ISO timestamp (e.g. 2026-11-21T15:04:00Z)"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def settings_env(settings: Settings) -> dict[str, str]:
    """`TRIBUTARY_*` variables that make a `tributary` subprocess use the same data, catalog and Spark settings."""
    env = {
        "TRIBUTARY_HOME": str(settings.home),
        "TRIBUTARY_LANDING": str(settings.landing),
        "TRIBUTARY_WAREHOUSE": str(settings.warehouse),
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
    if settings.spark_conf:
        env["TRIBUTARY_SPARK_CONF"] = ",".join(f"{k}={v}" for k, v in settings.spark_conf)
    return env


# ---------------------------------------------------------------------------------------------- catalog


def _local_path(location: str) -> Path:
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path))
    raise ConfigError(
        f"table metadata {location} is not on the local file system: the local SQL command reads local "
        "warehouses only; use --engine spark"
    )


class CatalogReader:
    """Table names and metadata from the Iceberg catalog database, read-only and without SQLAlchemy."""

    def __init__(self, settings: Settings):
        self.settings = settings

    def locations(self) -> dict[str, str]:
        """`namespace.table` -> current metadata file, for every table with a valid identifier."""
        if self.settings.uses_sqlite:
            rows = self._sqlite_rows()
        else:  # other catalog databases go through pyiceberg (slower to import, same answer)
            from infra.catalog import pyiceberg_catalog

            catalog = pyiceberg_catalog(self.settings)
            rows = []
            for ns in catalog.list_namespaces():
                for ident in catalog.list_tables(ns):
                    rows.append((".".join(ident[:-1]), ident[-1], catalog.load_table(ident).metadata_location))
        found = {}
        for ns, table, location in rows:
            name = f"{ns}.{table}"
            try:
                validate_table_name(name)
            except ConfigError:
                continue  # not addressable as namespace.table from SQL
            if location:
                found[name] = location
        return dict(sorted(found.items()))

    def _sqlite_rows(self) -> list[tuple[str, str, str]]:
        db = self.settings.catalog_db
        if not db.is_file():
            raise ConfigError(
                f"no catalog database at {db} (TRIBUTARY_HOME={self.settings.home}): run the pipeline first "
                "('tributary run' or 'make demo')"
            )
        con = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=30)
        try:
            return con.execute(
                "SELECT table_namespace, table_name, metadata_location FROM iceberg_tables "
                "WHERE catalog_name = ? AND coalesce(iceberg_type, 'TABLE') = 'TABLE'",
                (self.settings.catalog_name,),
            ).fetchall()
        except sqlite3.OperationalError as exc:
            raise ConfigError(f"catalog database {db} has no Iceberg catalog tables ({exc})") from exc
        finally:
            con.close()

    def tables(self) -> list[str]:
        """Sorted `namespace.table` names."""
        return list(self.locations())

    def metadata(self, name: str, locations: dict[str, str] | None = None) -> TableMetadata:
        """Parsed metadata of the table's current metadata file; UnknownTable lists the tables that exist."""
        ns, table = validate_table_name(name)
        locations = self.locations() if locations is None else locations
        key = f"{ns}.{table}"
        if key not in locations:
            raise unknown_table(key, list(locations))
        location = locations[key]
        raw = _local_path(location).read_bytes()
        if raw[:2] == b"\x1f\x8b":  # write.metadata.compression-codec=gzip
            raw = gzip.decompress(raw)
        return TableMetadata.parse(key, location, json.loads(raw))


def unknown_table(name: str, tables: Iterable[str]) -> UnknownTable:
    """The error for a missing table, listing the tables that exist."""
    listed = ", ".join(tables) or "none (run the pipeline first)"
    return UnknownTable(f"table {name} does not exist; tables: {listed}")


# ------------------------------------------------------------------------------------ statements


_META_SHOW = re.compile(r"^\s*show\s+tables(?:\s+(?:in|from)\s+([A-Za-z_][\w]*))?\s*;?\s*$", re.I)
_META_DESCRIBE = re.compile(r'^\s*(?:describe|desc)\s+(?:table\s+)?([\w."`]+)\s*;?\s*$', re.I)
_META_HISTORY = re.compile(r'^\s*show\s+history\s+([\w."`]+)\s*;?\s*$', re.I)


def _unquote_name(text: str) -> str:
    return "".join(part.strip('"`') for part in re.split(r"(\.)", text)).lower()


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
        raise TributaryError(f"cannot parse the query: {_first_line(exc)}{hint}") from exc
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


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


# ----------------------------------------------------------------------------------------- results


def _iceberg_type(node: object) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, dict):
        kind = node.get("type")
        if kind == "struct":
            return "struct<" + ", ".join(f"{f['name']}: {_iceberg_type(f['type'])}" for f in node["fields"]) + ">"
        if kind == "list":
            return f"list<{_iceberg_type(node['element'])}>"
        if kind == "map":
            return f"map<{_iceberg_type(node['key'])}, {_iceberg_type(node['value'])}>"
    return json.dumps(node)


def show_tables(catalog: CatalogReader, namespace: str | None = None) -> QueryResult:
    """Every table with its current row count, snapshot and last commit time."""
    locations = catalog.locations()
    rows = []
    for name in locations:
        if namespace and name.split(".")[0] != namespace.lower():
            continue
        meta = catalog.metadata(name, locations)
        snap = meta.current
        rows.append(
            (
                name,
                snap.count("total-records") if snap else 0,
                snap.snapshot_id if snap else None,
                snap.committed_at if snap else None,
            )
        )
    return QueryResult(("table", "rows", "snapshot_id", "updated_at"), rows)


def describe(catalog: CatalogReader, name: str, as_of: str | None = None) -> QueryResult:
    """Columns of a table (of the snapshot's schema with `as_of`)."""
    meta = catalog.metadata(_unquote_name(name))
    schema_id = None
    if as_of:
        snap = meta.snapshot_as_of(as_of)
        schema_id = snap.schema_id if snap.schema_id in meta.schemas else None
    rows = [(f["name"], _iceberg_type(f["type"]), not f.get("required", False)) for f in meta.fields(schema_id)]
    return QueryResult(("column", "type", "nullable"), rows)


def history(settings: Settings, name: str) -> QueryResult:
    """A table's snapshots, oldest first: operation, commit time and record counts from the summaries."""
    meta = CatalogReader(settings).metadata(_unquote_name(name))
    rows = [
        (
            s.snapshot_id,
            s.parent_id,
            s.operation,
            s.committed_at,
            s.count("total-records"),
            s.count("added-records"),
            s.count("deleted-records"),
            s.snapshot_id == meta.current_snapshot_id,
        )
        for s in sorted(meta.snapshots.values(), key=lambda s: (s.timestamp_ms, s.snapshot_id))
    ]
    columns = (
        "snapshot_id",
        "parent_id",
        "operation",
        "committed_at",
        "total_records",
        "added_records",
        "deleted_records",
        "current",
    )
    return QueryResult(columns, rows)


def meta_command(catalog: CatalogReader, sql: str, as_of: str | None = None) -> QueryResult | None:
    """Answer SHOW TABLES, DESCRIBE <table> and SHOW HISTORY <table> from the catalog; None for other SQL."""
    if m := _META_SHOW.match(sql):
        return show_tables(catalog, m.group(1))
    if m := _META_HISTORY.match(sql):
        return history(catalog.settings, m.group(1))
    if m := _META_DESCRIBE.match(sql):
        return describe(catalog, m.group(1), as_of)
    return None


# ------------------------------------------------------------------------------------------ engine


class SnapshotCache:
    """Parquet copies of table snapshots, keyed by table UUID, snapshot id and read schema."""

    def __init__(self, settings: Settings):
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
        from pyiceberg.table import StaticTable

        table = StaticTable.from_metadata(meta.location)
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
        self.as_of = as_of
        self.catalog = CatalogReader(settings)
        self.cache = SnapshotCache(settings)
        self._con: duckdb.DuckDBPyConnection | None = None
        self._views: dict[str, Path] = {}
        self._schemas: set[str] = set()

    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            con = duckdb.connect(":memory:")
            con.execute("SET TimeZone = 'UTC'")  # Spark's session time zone in Tributary
            try:  # also accept catalog-qualified names, as Spark does: tributary.gold.daily_revenue
                con.execute(f"ATTACH ':memory:' AS {self.settings.catalog_name}")
                con.execute(f"USE {self.settings.catalog_name}")
            except duckdb.Error:
                pass  # a catalog name DuckDB reserves (memory, system, temp): plain names still work
            # Lock the connection down: a query may read the cached snapshot files and nothing else.
            con.execute("SET python_enable_replacements = false")
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
        locations = self.catalog.locations()
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
        except duckdb.Error as exc:
            raise TributaryError(f"query failed: {_first_line(exc)}") from exc
        columns = tuple(d[0] for d in cursor.description or ())
        return QueryResult(columns, rows)

    def close(self) -> None:
        """Close the DuckDB connection."""
        if self._con is not None:
            self._con.close()
            self._con = None
            self._views.clear()
            self._schemas.clear()


def _catalog_error(exc: duckdb.Error, sql: str, tables: list[str]) -> TributaryError:
    message = _first_line(exc)
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


# ------------------------------------------------------------------------------------- spark engine


_SPARK_WRITE_CLASSES = (
    "org.apache.spark.sql.catalyst.plans.logical.Command",
    "org.apache.spark.sql.catalyst.plans.logical.ParsedStatement",
)


def check_spark_read_only(spark: object, sql: str) -> None:
    """Raise QueryRefused unless Spark parses `sql` as a query (not a command or a write statement).

    Parsing runs nothing; Spark's `spark.sql()` would run commands eagerly, so this check comes first.
    """
    jvm = spark._jvm  # type: ignore[attr-defined]
    try:
        plan = spark._jsparkSession.sessionState().sqlParser().parsePlan(sql)  # type: ignore[attr-defined]
    except Exception as exc:  # py4j wraps Spark's ParseException
        text = str(exc)
        detail = re.search(r"ParseException:\s*(.*)", text)
        raise TributaryError(f"cannot parse the query: {(detail.group(1) if detail else text).strip()}") from exc
    for class_name in _SPARK_WRITE_CLASSES:
        if jvm.java.lang.Class.forName(class_name).isInstance(plan):
            raise QueryRefused(f"{plan.nodeName()} is refused: {READ_ONLY}")


def _utc(value: object) -> object:
    # Spark returns naive datetimes in the Python process's local time zone.
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.astimezone(UTC)
    return value


def spark_query(settings: Settings, sql: str) -> QueryResult:
    """Run one read-only query through Spark SQL (for what DuckDB cannot do); time travel with FOR ... AS OF."""
    catalog = CatalogReader(settings)
    answered = meta_command(catalog, sql)
    if answered is not None:
        return answered
    from pyspark.errors import AnalysisException

    from infra.spark import get_spark

    spark = get_spark(settings)
    check_spark_read_only(spark, sql)
    spark.catalog.setCurrentCatalog(settings.catalog_name)
    try:
        df = spark.sql(sql)
        rows = df.collect()
    except AnalysisException as exc:
        text = str(exc)
        match = re.search(r"TABLE_OR_VIEW_NOT_FOUND\].*?`([^`]+)`(?:\.`([^`]+)`)?(?:\.`([^`]+)`)?", text)
        if match:
            parts = [p for p in match.groups() if p]
            name = ".".join(parts[-2:]) if len(parts) >= 2 else parts[0]
            raise unknown_table(name, catalog.tables()) from exc
        raise TributaryError(f"query failed: {_first_line(exc)}") from exc
    return QueryResult(tuple(df.columns), [tuple(_utc(v) for v in row) for row in rows])


def run_query(settings: Settings, sql: str, engine: str = "duckdb", as_of: str | None = None) -> QueryResult:
    """Run one read-only query with the chosen engine (a fresh DuckDB connection for `duckdb`)."""
    if engine == "spark":
        if as_of:
            raise ConfigError(
                "--as-of is for the local engine; with --engine spark write the time travel into the SQL: "
                "SELECT ... FROM gold.daily_revenue FOR VERSION AS OF <snapshot id> "
                "(or FOR TIMESTAMP AS OF '2026-11-21 15:00:00')"
            )
        return spark_query(settings, sql)
    if engine != "duckdb":
        raise ConfigError(f"unknown engine {engine!r}; choose one of {ENGINES}")
    engine_ = LocalEngine(settings, as_of=as_of)
    try:
        return engine_.query(sql)
    finally:
        engine_.close()
