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
from pathlib import Path

from infra.errors import ConfigError, TributaryError
from infra.identifiers import validate_table_name
from infra.object_store import is_object_url
from infra.paths import GZIP_MAGIC, local_path
from infra.settings import Settings
from infra.sql.delta_tables import delta_metadata, delta_tables
from infra.sql.table_metadata import TableMetadata


class QueryRefused(TributaryError):
    """A statement that is not a read-only query."""


class UnknownTable(TributaryError):
    """A query or command names a table the catalog does not have."""


@dataclass(frozen=True)
class QueryResult:
    """Column names and rows (Python values; timestamps are timezone-aware UTC)."""

    columns: tuple[str, ...]
    rows: list[tuple]


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


def _read(settings: Settings, location: str) -> bytes:
    """The bytes of a metadata file, on the local file system or in the warehouse's bucket."""
    path = local_path(location)
    if path is not None:
        return path.read_bytes()
    if is_object_url(location):
        return settings.object_store.read_bytes(location)
    raise ConfigError(
        f"table metadata {location} is neither a local file nor on S3-compatible storage: the local SQL command "
        "cannot read it; use --engine spark"
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

    def table_locations(self) -> dict[str, str]:
        """Every table the SQL commands read: the Iceberg catalog's (metadata files) and the Delta tables under the
        warehouse (folders, see `infra.sql.delta_tables`). A home with Delta tables needs no catalog database."""
        delta = {name: str(folder) for name, folder in delta_tables(self.settings).items()}
        try:
            iceberg = self.locations()
        except ConfigError:
            if not delta:
                raise
            iceberg = {}
        return dict(sorted({**iceberg, **delta}.items()))

    def tables(self) -> list[str]:
        """Sorted `namespace.table` names."""
        return list(self.table_locations())

    def metadata(self, name: str, locations: dict[str, str] | None = None) -> TableMetadata:
        """Parsed metadata of the table's current metadata file (a Delta table's log); UnknownTable lists the
        tables that exist."""
        ns, table = validate_table_name(name)
        locations = self.table_locations() if locations is None else locations
        key = f"{ns}.{table}"
        if key not in locations:
            raise unknown_table(key, list(locations))
        location = locations[key]
        if (Path(location) / "_delta_log").is_dir():  # a Delta table's folder, not an Iceberg metadata file
            return delta_metadata(key, Path(location))
        raw = _read(self.settings, location)
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
_COMMENTS = re.compile(r"--[^\n]*|/\*.*?\*/", re.S)


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
    locations = catalog.table_locations()
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
    """Answer SHOW TABLES, DESCRIBE <table> and SHOW HISTORY <table> from the catalog; None for other SQL.

    Comments around the command are left out: a pasted script splits into statements that start with the comment
    written after the previous statement's `;`.
    """
    sql = _COMMENTS.sub(" ", sql)
    if m := _META_SHOW.match(sql):
        return show_tables(catalog, m.group(1))
    if m := _META_HISTORY.match(sql):
        return history(catalog.settings, m.group(1))
    if m := _META_DESCRIBE.match(sql):
        return describe(catalog, m.group(1), as_of)
    return None
