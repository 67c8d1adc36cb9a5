"""One writer per table: an exclusive lock held from before a table's stream starts until its last checkpoint commit.

The lock is an OS file lock (`flock`) on `<checkpoints>/_locks/<table>.lock`, so it is shared by every process that
runs the table from the same home: CLI runs, Dagster runs, reprocess and full refresh. The kernel releases it when
its holder dies, however it dies, so a lock left by a killed process is taken over at once; the holder's pid,
host and start time are written into the file only to name it in messages. On a cluster the checkpoints folder
is shared storage, whose file system must support `flock` (local disks and NFSv4 do), and a run takes its
executors before it waits for a lock.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from infra.errors import PipelineError
from infra.identifiers import validate_table_name
from infra.settings import Settings
from infra.spark import get_spark

log = logging.getLogger("tributary")
_POLL_SECONDS = 0.25
# Locks this process holds: an operation that holds a table's lock (a full refresh) may run the table itself.
_held: dict[Path, int] = {}


def lock_path(settings: Settings, table: str) -> Path:
    """The lock file of `table`."""
    validate_table_name(table)
    return settings.checkpoints / "_locks" / f"{table}.lock"


def holder(path: Path) -> str:
    """Who holds the lock at `path`, as written by the holder (pid, host, since, command)."""
    try:
        info = json.loads(path.read_text() or "{}")
    except (OSError, json.JSONDecodeError):
        info = {}
    if not info:
        return "another process (it has not written its name yet)"
    return f"pid {info.get('pid')} on {info.get('host')} since {info.get('since')} ({info.get('command', '?')})"


@contextmanager
def table_lock(settings: Settings, table: str, wait_seconds: float) -> Iterator[None]:
    """Hold `table`'s writer lock; wait up to `wait_seconds` for another holder, then fail naming it.

    Re-entrant within a process (one thread at a time writes a table here: runs are sequential).
    """
    path = lock_path(settings, table)
    if not settings.local_master and not _held:
        # On a cluster a starting session waits for executors, which another run holding them may keep while it
        # waits for this lock: get executors first, never while holding a lock (no lock-for-cores deadlock).
        get_spark(settings)
    if path in _held:
        _held[path] += 1
        try:
            yield
        finally:
            _held[path] -= 1
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + max(wait_seconds, 0)
        announced = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                who = holder(path)
                if time.monotonic() >= deadline:
                    raise PipelineError(
                        f"table {table} is being written by {who}; gave up after {wait_seconds:g} s "
                        "(TRIBUTARY_LOCK_WAIT); let that run finish, or stop it, and re-run"
                    ) from None
                if not announced:
                    log.warning("table %s is being written by %s; waiting up to %g s", table, who, wait_seconds)
                    announced = True
                time.sleep(_POLL_SECONDS)
        os.ftruncate(fd, 0)
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv)[:200],
        }
        os.pwrite(fd, json.dumps(info).encode(), 0)
        _held[path] = 1
        try:
            yield
        finally:
            del _held[path]
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
