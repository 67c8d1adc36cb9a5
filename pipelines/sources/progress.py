"""Live progress of table runs for whoever watches (the CLI's terminal lines): silent unless a watcher is set.

The runner says when a table starts and ends; a running query reports its batches and input rows so far about
once a second (`pipelines.sources.stream_query`, and after each Kafka batch).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


class Watcher(Protocol):
    """Receives the progress of table runs in this process."""

    def started(self, table: str) -> None:
        """A table's run began."""

    def progressed(self, table: str, batches: int, rows: int) -> None:
        """The table's run has committed `batches` batches and read `rows` input rows so far."""

    def ended(self, table: str, status: str, rows: int) -> None:
        """The run ended: `succeeded`, `skipped` or `failed`, having read `rows` input rows."""


_WATCHERS: list[Watcher] = []


@contextmanager
def watching(watcher: Watcher) -> Iterator[Watcher]:
    """Send the progress of every table run in this block to `watcher`."""
    _WATCHERS.append(watcher)
    try:
        yield watcher
    finally:
        _WATCHERS.remove(watcher)


def started(table: str) -> None:
    """Tell the watchers a table's run began."""
    for watcher in _WATCHERS:
        watcher.started(table)


def progressed(table: str, batches: int, rows: int) -> None:
    """Tell the watchers how far a table's run has got."""
    for watcher in _WATCHERS:
        watcher.progressed(table, batches, rows)


def ended(table: str, status: str, rows: int) -> None:
    """Tell the watchers a table's run ended."""
    for watcher in _WATCHERS:
        watcher.ended(table, status, rows)
