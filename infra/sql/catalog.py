"""The lakehouse catalog as the analysts' SQL commands see it: table metadata, snapshots, SHOW/DESCRIBE/HISTORY.

Table metadata is read with the standard library only (the catalog database with `sqlite3`, metadata files
with `json`), so `tributary sql` starts in a fraction of a second. Nothing here writes.
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from infra.errors import ConfigError, TributaryError
from infra.identifiers import validate_table_name
from infra.paths import GZIP_MAGIC, local_path
from infra.settings import Settings


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


def validate_as_of(as_of: str | None) -> str | None:
    """`--as-of` stripped; ConfigError for an empty value (which would otherwise silently mean "now")."""
    if as_of is None:
        return None
    if not as_of.strip():
        raise ConfigError(
            "--as-of is empty: give a snapshot id or an ISO timestamp (see 'tributary history <table>'), "
            "or leave --as-of out to read the current snapshots"
        )
    return as_of.strip()


# ---------------------------------------------------------------------------------------------- catalog


def _local_path(location: str) -> Path:
    path = local_path(location)
    if path is not None:
        return path
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
        if raw[:2] == GZIP_MAGIC:  # write.metadata.compression-codec=gzip
            raw = gzip.decompress(raw)
        return TableMetadata.parse(key, location, json.loads(raw))


def unknown_table(name: str, tables: Iterable[str]) -> UnknownTable:
    """The error for a missing table, listing the tables that exist."""
    listed = ", ".join(tables) or "none (run the pipeline first)"
    return UnknownTable(f"table {name} does not exist; tables: {listed}")


_META_SHOW = re.compile(r"^\s*show\s+tables(?:\s+(?:in|from)\s+([A-Za-z_][\w]*))?\s*;?\s*$", re.I)
_META_DESCRIBE = re.compile(r'^\s*(?:describe|desc)\s+(?:table\s+)?([\w."`]+)\s*;?\s*$', re.I)
_META_HISTORY = re.compile(r'^\s*show\s+history\s+([\w."`]+)\s*;?\s*$', re.I)


def _unquote_name(text: str) -> str:
    return "".join(part.strip('"`') for part in re.split(r"(\.)", text)).lower()


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
