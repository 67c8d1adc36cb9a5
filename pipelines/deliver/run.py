"""Running a sink: one dispatcher over the destination kinds (the kinds differ only in how they take rows)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from infra.settings import Settings
from infra.spark import Session, started_session
from pipelines.deliver.changes import current_position, pending
from pipelines.io.formats import table_format
from pipelines.run.locks import table_lock
from pipelines.spec.delivery import SinkError, SinkSpec
from pipelines.spec.registry import Registry


@dataclass(frozen=True)
class SinkReport:
    """What one run of a sink did: numbers Dagster records and plots."""

    sink: str
    table: str
    destination: str
    # first (every row), changes (what the commits since the last delivery changed), unchanged, or empty (the
    # table has no commit yet)
    mode: str
    rows: int = 0
    deleted: int = 0
    # Rows the table's commits removed that a destination without keys cannot take back.
    not_retracted: int = 0
    snapshot: int | None = None
    seconds: float = 0.0

    @property
    def delivered(self) -> bool:
        """Whether this run wrote to the destination."""
        return self.mode in ("first", "changes")

    def line(self) -> str:
        """One line for the terminal."""
        if not self.delivered:
            why = "nothing new" if self.mode == "unchanged" else f"{self.table} has no commit yet"
            return f"sink {self.sink}: {why} ({self.destination})"
        extra = f", {self.deleted} deleted" if self.deleted else ""
        extra += f", {self.not_retracted} removed rows not retracted (no keys)" if self.not_retracted else ""
        return (
            f"sink {self.sink}: {self.rows} rows{extra} of {self.table} up to snapshot {self.snapshot} delivered to "
            f"{self.destination} in {self.seconds:.1f} s"
        )


def run_sink(spark: Session, settings: Settings, registry: Registry, sink: SinkSpec) -> SinkReport:
    """Deliver what `sink`'s table changed since the destination's position, exactly once (`SinkError` naming the
    sink, its destination and the fix when it cannot: nothing is delivered then, and the next run catches up)."""
    started = time.perf_counter()
    upstream = registry.get(sink.table)
    fmt = table_format(settings)
    destination = sink.destination
    with table_lock(settings, sink.lock_name, settings.lock_wait_seconds) as lock:
        until = current_position(fmt, sink.table)
        if until is None:
            return SinkReport(sink.name, sink.table, destination.describe(), "empty")
        since = destination.position(settings, sink.name)
        if since == until:
            return SinkReport(sink.name, sink.table, destination.describe(), "unchanged", snapshot=until.snapshot)
        delivery, cached = pending(
            lambda: started_session(spark, settings), fmt, sink, upstream.sink.appends_only, since, until
        )
        try:
            lock.fence()
            rows, deleted = destination.deliver(settings, delivery)
        finally:
            if cached is not None:
                cached.unpersist()
    mode = "first" if since is None or since.table_id != until.table_id else "changes"
    seconds = round(time.perf_counter() - started, 3)
    return SinkReport(
        sink.name,
        sink.table,
        destination.describe(),
        mode,
        rows,
        deleted,
        delivery.not_retracted,
        until.snapshot,
        seconds,
    )


def sinks_of(registry: Registry, tables: Iterable[str] | None = None) -> list[SinkSpec]:
    """The sinks that follow `tables` (default: every sink), in declaration order."""
    wanted = None if tables is None else set(tables)
    return [s for s in registry.sinks if wanted is None or s.table in wanted]


def run_sinks(
    spark: Session, settings: Settings, registry: Registry, tables: Iterable[str] | None = None
) -> tuple[list[SinkReport], list[SinkError]]:
    """Run every sink that follows `tables` (default: every sink), each on its own: one that fails does not stop
    the others. Returns the reports and the failures."""
    reports, failures = [], []
    for sink in sinks_of(registry, tables):
        try:
            reports.append(run_sink(spark, settings, registry, sink))
        except SinkError as exc:
            failures.append(exc)
    return reports, failures


@dataclass(frozen=True)
class Reconciliation:
    """Whether a sink's destination holds every row of its table (the rows delivered against the rows added)."""

    passed: bool
    description: str
    table_rows: int | None = None
    held_rows: int | None = None


def reconcile(settings: Settings, registry: Registry, sink: SinkSpec) -> Reconciliation:
    """Compare the rows `sink`'s destination holds with its table's rows at the position it was delivered to.

    Comparable when each row of the table is one row there: a destination with keys (a row per key), or one
    without keys following a table that only appends. Anything else passes, saying why it was not compared.
    """
    fmt = table_format(settings)
    until = current_position(fmt, sink.table)
    since = sink.destination.position(settings, sink.name)
    if until is None or since != until:
        return Reconciliation(True, f"not compared: {sink.table} has changed since the last delivery")
    held = sink.destination.held_rows(settings, sink.name)
    if held is None or not (sink.destination.keyed or registry.get(sink.table).sink.appends_only):
        return Reconciliation(True, f"not compared: {sink.destination.describe()} does not hold one row per row")
    rows = fmt.stats(None, sink.table).rows
    if held == rows:
        return Reconciliation(True, f"{sink.destination.describe()} holds all {rows} rows of {sink.table}", rows, held)
    return Reconciliation(
        False,
        f"{sink.destination.describe()} holds {held} rows where {sink.table} has {rows} at snapshot "
        f"{until.snapshot}: rows were changed there by something else than sink {sink.name}",
        rows,
        held,
    )
