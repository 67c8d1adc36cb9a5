"""Scratch folders for Tributary's JVMs: Java's temp folder and Spark's local folder, one per JVM, removed once
their owner is gone.

A JVM that ends normally deletes its temporary files, but one that is killed (SIGKILL, the OOM killer, a lost
host) leaves them in the system temp folder: Spark's copies of the `spark.jars` files, its block-manager folders,
the native libraries sqlite-jdbc, lz4 and snappy unpack. Measured here: about 80 MB per killed driver, which
filled a 75 GB disk over a few hundred killed runs. So each JVM gets a folder of its own under
`TRIBUTARY_SCRATCH`, and whoever claims the next one removes every folder whose owner has ended.

The owner is told by an exclusive `flock` on the folder's `.owner` file, held by the claiming process (or, for a
daemon, by the daemon itself, which inherits the open file): the kernel releases it when the last holder ends,
however it ends, so there are no pid files to outlive their processes.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

OWNER = ".owner"
# A folder being claimed: its lock is taken before it gets its final name, so it is swept only when old.
_CLAIMING = ".claiming-"
_CLAIM_SECONDS = 3600


@dataclass(frozen=True)
class Scratch:
    """A claimed scratch folder and the open file whose lock marks it as in use."""

    path: Path
    fd: int

    def java_options(self) -> str:
        """The JVM option that puts Java's temp files (native libraries, Spark's artifacts) in the folder."""
        return f"-Djava.io.tmpdir={self.path}"

    def release(self) -> None:
        """Close this process's copy of the lock (a daemon that inherited it keeps the folder in use)."""
        with contextlib.suppress(OSError):
            os.close(self.fd)


_process: Scratch | None = None


def default_root() -> Path:
    """`<system temp>/tributary-<uid>`: per user, so that another user's folders are never in the way."""
    return Path(tempfile.gettempdir()) / f"tributary-{os.getuid()}"


def _owner_ended(folder: Path) -> bool:
    try:
        fd = os.open(folder / OWNER, os.O_RDWR)
    except OSError:
        return False  # not a scratch folder (or not ours to judge)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def _abandoned(folder: Path) -> bool:
    if folder.name.startswith(_CLAIMING):  # a claim killed before its rename
        with contextlib.suppress(OSError):
            return time.time() - folder.stat().st_mtime > _CLAIM_SECONDS
        return False
    return folder.is_dir() and _owner_ended(folder)


def sweep(root: Path) -> list[Path]:
    """Remove the folders under `root` whose owner has ended; returns them."""
    removed = []
    with contextlib.suppress(OSError):
        for folder in root.iterdir():
            if not _abandoned(folder):
                continue
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def claim(root: Path) -> Scratch:
    """A new scratch folder under `root`, locked by this process, after sweeping the folders of ended owners.

    Pass `Scratch.fd` to a child (`subprocess.Popen(pass_fds=...)`) to make the child its owner, then `release`.
    """
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    sweep(root)
    staging = Path(tempfile.mkdtemp(prefix=_CLAIMING, dir=root))
    fd = os.open(staging / OWNER, os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: no one else holds it
    folder = root / f"{os.getpid()}-{staging.name.removeprefix(_CLAIMING)}"
    staging.rename(folder)
    return Scratch(folder, fd)


def process_scratch(root: Path) -> Scratch:
    """This process's scratch folder, claimed under `root` on first use (a process has one JVM, whose temp folder
    is fixed when it starts). Removed by the next claim after this process ends."""
    global _process
    if _process is None or not _process.path.is_dir():
        _process = claim(root)
    return _process
