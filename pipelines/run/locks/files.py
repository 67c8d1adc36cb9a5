"""The writer lock of a home with a SQLite catalog: `flock` on `<checkpoints>/_locks/<table>.lock`.

The kernel releases it when its holder dies. On a cluster the checkpoints folder is shared storage whose file
system must support `flock` (local disks and NFSv4 do); a cluster whose hosts share no disk uses a PostgreSQL
catalog, and with it PostgreSQL's advisory locks (`pipelines.run.locks.postgres`).
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from infra.settings import Settings


def lock_path(settings: Settings, table: str) -> Path:
    """The lock file of `table`."""
    return settings.checkpoints / "_locks" / f"{table}.lock"


class FileLock:
    """`flock` on one file; the holder's record is the file's content."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._locked = False

    def try_acquire(self) -> bool:
        """Take the lock if no other process holds it."""
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        self._locked = True
        return True

    def holder(self) -> dict[str, object]:
        """What the holder wrote into the file."""
        try:
            info = json.loads(self.path.read_text() or "{}")
        except (OSError, json.JSONDecodeError):
            return {}
        return info if isinstance(info, dict) else {}

    def record_holder(self, info: dict[str, object]) -> None:
        """Write the holder into the file (read by waiters only)."""
        assert self._fd is not None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, json.dumps(info).encode(), 0)

    def still_held(self) -> str | None:
        """A file lock is held until released or the process ends."""
        return None

    def release(self) -> None:
        """Unlock and close; the record is cleared."""
        if self._fd is None:
            return
        try:
            if self._locked:
                os.ftruncate(self._fd, 0)
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd, self._locked = None, False
