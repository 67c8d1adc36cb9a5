"""A Delta table at a path (another team's lakehouse table) as a sink's destination: the rows and the sink's
position in one Delta commit.

The commit (delta-rs) carries the position in its commit info (`tributary.sink`, `tributary.position`) and an
application transaction (`tributary-sink-<name>`, version = the sink's delivery count), the way Delta writers mark
idempotent writes. Without keys the rows are appended; with keys one MERGE updates or inserts each key and deletes
the keys that left the table. A run killed before the commit leaves the table as it was (delta-rs writes the log
entry last, atomically); files it wrote without a commit are never read, and VACUUM removes them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from infra.errors import ConfigError, first_line
from pipelines.spec.delivery import Delivery, Destination, Position, SinkError

if TYPE_CHECKING:
    from infra.settings import Settings

_SINK = "tributary.sink"
_POSITION = "tributary.position"
_GONE = "_tributary_gone"


@dataclass(frozen=True)
class TablePath(Destination):
    """The Delta table at `path` (a local folder; created on the first delivery)."""

    format: str
    path: str
    keys: tuple[str, ...] = ()
    kind = "delta"

    def __post_init__(self) -> None:
        if self.format != "delta":
            raise ConfigError(
                f"sink table path {self.path!r}: format {self.format!r} is not supported; deliver to a 'delta' table "
                "(an Iceberg table needs a catalog to commit through: declare it as a table of the home instead)"
            )
        if "://" in self.path and not self.path.startswith("file://"):
            raise ConfigError(f"sink table path {self.path!r} must be a local folder (buckets are not supported yet)")
        if not Path(self.path.removeprefix("file://")).is_absolute():
            raise ConfigError(f"sink table path {self.path!r} must be absolute (e.g. /data/shared/orders)")

    @property
    def folder(self) -> str:
        """The table's folder."""
        return self.path.removeprefix("file://")

    def describe(self) -> str:
        return f"Delta table at {self.folder}"

    def with_keys(self, keys: tuple[str, ...]) -> TablePath:
        return self if self.keys else TablePath(self.format, self.path, keys)

    def _table(self):
        from deltalake import DeltaTable

        return DeltaTable(self.folder) if DeltaTable.is_deltatable(self.folder) else None

    def _delivered(self, sink: str) -> tuple[Position | None, dict]:
        """The sink's position and its last commit info; (None, {}) before its first delivery."""
        table = self._table()
        if table is None:
            return None, {}
        for limit in (100, None):  # other writers may have committed since: look further back if need be
            for commit in table.history(limit):
                if commit.get(_SINK) == sink:
                    position = json.loads(commit[_POSITION])
                    return Position(position["table_id"], int(position["snapshot"])), position
            if limit is not None and len(table.history(limit)) < limit:
                break
        return None, {}

    def position(self, settings: Settings, sink: str) -> Position | None:
        try:
            return self._delivered(sink)[0]
        except Exception as exc:  # delta-rs raises its own error types
            raise SinkError(f"sink {sink}: reading {self.describe()} failed: {first_line(exc)}") from None

    def held_rows(self, settings: Settings, sink: str) -> int | None:
        table = self._table()
        return None if table is None else table.to_pyarrow_dataset().count_rows()

    def deliver(self, settings: Settings, delivery: Delivery) -> tuple[int, int]:
        import pyarrow as pa
        from deltalake import CommitProperties, Transaction, write_deltalake

        rows = delivery.rows.toArrow()
        deleted = delivery.deleted.toArrow() if delivery.deleted is not None else None
        app = f"tributary-sink-{delivery.sink}"
        since, last = self._delivered(delivery.sink)
        if since != delivery.since:
            raise SinkError(
                f"sink {delivery.sink}: {self.describe()} received other changes while this run read its own "
                "(another run of the sink?); nothing was delivered: run it again"
            )
        count = int(last.get("deliveries", 0)) + 1
        position = {"table_id": delivery.until.table_id, "snapshot": delivery.until.snapshot, "deliveries": count}
        commit = CommitProperties(
            custom_metadata={_SINK: delivery.sink, _POSITION: json.dumps(position)},
            app_transactions=[Transaction(app_id=app, version=count)],
        )
        table = self._table()
        gone = 0 if deleted is None else deleted.num_rows
        try:
            if table is None or not self.keys:
                write_deltalake(self.folder, rows, mode="append", commit_properties=commit)
                return rows.num_rows, 0
            source = rows.append_column(_GONE, pa.array([False] * rows.num_rows))
            if gone:
                keys_only = {f.name: pa.nulls(gone, f.type) for f in rows.schema}
                keys_only.update({k: deleted.column(k).cast(rows.schema.field(k).type) for k in self.keys})
                removed = pa.table({**keys_only, _GONE: pa.array([True] * gone)}, schema=source.schema)
                source = pa.concat_tables([source, removed])
            match = " AND ".join(f"t.`{k}` = s.`{k}`" for k in self.keys)
            values = {c: f"s.`{c}`" for c in rows.column_names}
            (
                table.merge(source, match, source_alias="s", target_alias="t", commit_properties=commit)
                .when_matched_delete(predicate=f"s.{_GONE}")
                .when_matched_update(updates=values, predicate=f"NOT s.{_GONE}")
                .when_not_matched_insert(updates=values, predicate=f"NOT s.{_GONE}")
                .execute()
            )
        except Exception as exc:  # delta-rs raises its own error types
            raise SinkError(
                f"sink {delivery.sink}: delivering to {self.describe()} failed, nothing was delivered: "
                f"{first_line(exc)}"
            ) from None
        return rows.num_rows, gone
