"""One writer per table: an exclusive lock held from before a table's stream starts until its last checkpoint commit.

Two kinds, chosen by the catalog (`writer_lock`), each released by the system when its holder dies, however it dies,
so a lock left by a killed process is taken over at once:

- with the embedded SQLite catalog, an OS file lock (`flock`) on `<checkpoints>/_locks/<table>.lock`
  (`pipelines.run.locks.files`): shared by every process that runs the table from the same home;
- with a PostgreSQL catalog, a PostgreSQL advisory lock held on the run's own connection to the catalog database
  (`pipelines.run.locks.postgres`): shared by every host that reaches that database, with no shared disk.

Who holds a lock (pid, host, since, command) is recorded beside it only to name the holder in messages. An
incremental run checks that it still holds its lock before each commit (`HeldLock.fence`): a PostgreSQL lock ends
with its connection, and a run that lost it stops before committing again. Exactly-once never rests on the lock alone:
every commit carries its batch's tag, so a batch committed twice is found and skipped.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Protocol

from infra.catalog import postgres_dsn
from infra.errors import PipelineError
from infra.identifiers import validate_table_name
from infra.settings import Settings
from infra.spark import get_spark
from pipelines.run.locks.files import FileLock, lock_path
from pipelines.run.locks.postgres import PostgresLock

log = logging.getLogger("tributary")
_POLL_SECONDS = 0.25

__all__ = ["HeldLock", "WriterLock", "holder_line", "lock_path", "table_lock", "writer_lock"]


class WriterLock(Protocol):
    """One table's writer lock, of one kind."""

    def try_acquire(self) -> bool:
        """Take the lock if it is free; whether it was taken."""

    def holder(self) -> dict[str, object]:
        """What its holder recorded (pid, host, since, command); empty when it recorded nothing yet."""

    def record_holder(self, info: dict[str, object]) -> None:
        """Record who holds it (after `try_acquire` took it)."""

    def still_held(self) -> str | None:
        """None while this process holds it; else why it does not any more."""

    def release(self) -> None:
        """Let it go (and forget the holder record)."""


def writer_lock(settings: Settings, table: str) -> WriterLock:
    """The kind of lock the home's catalog gives: advisory locks in a PostgreSQL catalog, else a file lock."""
    validate_table_name(table)
    dsn = postgres_dsn(settings)
    if dsn is not None:
        return PostgresLock(dsn, settings.catalog_name, table)
    return FileLock(lock_path(settings, table))


def holder_line(info: dict[str, object]) -> str:
    """Who holds a lock, for a message."""
    if not info:
        return "another process (it has not written its name yet)"
    return f"pid {info.get('pid')} on {info.get('host')} since {info.get('since')} ({info.get('command', '?')})"


class HeldLock:
    """A lock this process holds: `fence()` before a commit stops a writer that lost it."""

    def __init__(self, table: str, lock: WriterLock | None) -> None:
        self.table = table
        self._lock = lock

    def fence(self) -> None:
        """Raise PipelineError, naming the table, when the lock is no longer held (nothing more may be committed)."""
        lost = self._lock.still_held() if self._lock is not None else None
        if lost is not None:
            raise PipelineError(
                f"table {self.table}: this run lost its writer lock ({lost}), so it stopped before its next commit; "
                "re-run it: it goes on from the last committed batch"
            )


# Locks this process holds: an operation that holds a table's lock (a full refresh) may run the table itself.
_held: dict[tuple[str, str], tuple[HeldLock, int]] = {}


def _key(settings: Settings, table: str) -> tuple[str, str]:
    return (str(postgres_dsn(settings) or lock_path(settings, table)), table)


@contextmanager
def table_lock(settings: Settings, table: str, wait_seconds: float) -> Iterator[HeldLock]:
    """Hold `table`'s writer lock; wait up to `wait_seconds` for another holder, then fail naming it.

    Re-entrant within a process (one thread at a time writes a table here: runs are sequential).
    """
    key = _key(settings, table)
    if not settings.local_master and not _held:
        # On a cluster a starting session waits for executors, which another run holding them may keep while it
        # waits for this lock: get executors first, never while holding a lock (no lock-for-cores deadlock).
        get_spark(settings)
    if key in _held:
        held, depth = _held[key]
        _held[key] = (held, depth + 1)
        try:
            yield held
        finally:
            _held[key] = (held, _held[key][1] - 1)
        return
    lock = writer_lock(settings, table)
    try:
        _acquire(lock, table, wait_seconds)
        held = HeldLock(table, lock)
        _held[key] = (held, 1)
        try:
            yield held
        finally:
            del _held[key]
    finally:
        lock.release()


def _acquire(lock: WriterLock, table: str, wait_seconds: float) -> None:
    deadline = time.monotonic() + max(wait_seconds, 0)
    announced = False
    while not lock.try_acquire():
        who = holder_line(lock.holder())
        if time.monotonic() >= deadline:
            raise PipelineError(
                f"table {table} is being written by {who}; gave up after {wait_seconds:g} s "
                "(TRIBUTARY_LOCK_WAIT); let that run finish, or stop it, and re-run"
            )
        if not announced:
            log.warning("table %s is being written by %s; waiting up to %g s", table, who, wait_seconds)
            announced = True
        time.sleep(_POLL_SECONDS)
    lock.record_holder(
        {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv)[:200],
        }
    )
