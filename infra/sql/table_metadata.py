"""Table metadata as the SQL commands see it: snapshots (Delta: versions), schemas and the snapshot log."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from infra.errors import ConfigError, TributaryError

if TYPE_CHECKING:
    from pyspark.sql.types import StructField


@dataclass(frozen=True)
class Snapshot:
    """One Iceberg snapshot as its table metadata records it (for a Delta table: one version)."""

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
    format: str = "iceberg"  # or "delta": then snapshots are versions (infra.sql.delta_tables)

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

    def spark_columns(self) -> dict[str, str | None]:
        """The current schema's columns as Spark names their types (`DataType.simpleString`: `timestamptz` is
        `timestamp`, `long` is `bigint`); None for a type Spark has no name for here."""
        return {f["name"]: spark_type(f["type"]) for f in self.fields()}

    def stands_as(self, declared: Iterable[StructField], allow_added: bool = False) -> bool:
        """Whether the table holds every `declared` column at its type, and no other column unless `allow_added`.
        False for any doubt: the caller then asks Spark, which adds a column or names the difference."""
        have = self.spark_columns()
        want = {f.name: f.dataType.simpleString() for f in declared}
        if not allow_added and set(have) != set(want):
            return False
        return all(have.get(name) == kind for name, kind in want.items())


# Iceberg's primitive types as Spark reads them (Spark's simpleString).
_SPARK_PRIMITIVES = {
    "boolean": "boolean",
    "int": "int",
    "long": "bigint",
    "float": "float",
    "double": "double",
    "date": "date",
    "timestamptz": "timestamp",
    "timestamp": "timestamp_ntz",
    "string": "string",
    "uuid": "string",
    "binary": "binary",
}


def spark_type(iceberg: str | dict) -> str | None:
    """An Iceberg type (as `metadata.json` writes it) as Spark's simpleString; None when not known here."""
    if isinstance(iceberg, str):
        decimal = re.fullmatch(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)", iceberg)
        if decimal:
            return f"decimal({decimal[1]},{decimal[2]})"
        return "binary" if iceberg.startswith("fixed[") else _SPARK_PRIMITIVES.get(iceberg)
    kind = iceberg.get("type")
    if kind == "list":
        element = spark_type(iceberg["element"])
        return None if element is None else f"array<{element}>"
    if kind == "map":
        key, value = spark_type(iceberg["key"]), spark_type(iceberg["value"])
        return None if key is None or value is None else f"map<{key},{value}>"
    if kind == "struct":
        fields = [(f["name"], spark_type(f["type"])) for f in iceberg.get("fields", [])]
        if any(t is None for _, t in fields):
            return None
        return f"struct<{','.join(f'{n}:{t}' for n, t in fields)}>"
    return None


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
