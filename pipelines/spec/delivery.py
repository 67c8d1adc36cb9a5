"""What a sink is: a name, the table it follows, and the destination that takes its rows (one class per kind)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from infra.errors import PipelineError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from infra.settings import Settings


class SinkError(PipelineError):
    """A sink could not deliver; the message names the sink, its destination and the fix. Nothing was delivered."""


@dataclass(frozen=True)
class Position:
    """The table commit a destination has received every change up to: the table's identity (a table dropped and
    created again has another) and its snapshot id (Delta: version)."""

    table_id: str
    snapshot: int


@dataclass
class Delivery:
    """One run's changes of the followed table, for a destination to take in one transaction."""

    sink: str
    table: str
    # Rows as they are now: every row on a first delivery, else the rows the commits added or changed.
    rows: DataFrame
    # The key columns of rows the commits deleted (None: the destination has no keys, or nothing was deleted).
    deleted: DataFrame | None
    since: Position | None
    until: Position
    # Rows the commits removed that a destination without keys cannot take back (counted, never silently dropped).
    not_retracted: int = 0


class Destination:
    """Where a sink delivers; each kind keeps the position it received up to atomically with the rows."""

    kind: ClassVar[str] = "destination"
    # The columns a row is taken back by (updated, deleted); empty: rows are only added.
    keys: tuple[str, ...] = ()

    @property
    def keyed(self) -> bool:
        """Whether the destination can take a row back (by its keys)."""
        return bool(self.keys)

    def describe(self) -> str:
        """The destination as messages name it, without credentials."""
        raise NotImplementedError

    def with_keys(self, keys: tuple[str, ...]) -> Destination:
        """The destination with `keys` when it was declared without its own (the followed table's keys)."""
        return self

    def position(self, settings: Settings, sink: str) -> Position | None:
        """The position the destination has received everything up to; None before its first delivery."""
        raise NotImplementedError

    def held_rows(self, settings: Settings, sink: str) -> int | None:
        """The rows the destination holds from this sink, where it can tell (None: it cannot, or nothing yet)."""
        return None

    def deliver(self, settings: Settings, delivery: Delivery) -> tuple[int, int]:
        """Write `delivery`'s rows (and deletes) and its position in one transaction; (rows written, rows deleted).
        Raises `SinkError` when the destination's position is no longer `delivery.since` (another run delivered)."""
        raise NotImplementedError


@dataclass(frozen=True)
class SinkSpec:
    """A declared sink: its name, the table it follows, its destination and where it was declared."""

    name: str
    table: str
    destination: Destination
    where: str = ""

    @property
    def lock_name(self) -> str:
        """The name of the writer lock runs of this sink take turns on (`pipelines.run.locks`)."""
        return f"sinks.{self.name}"
