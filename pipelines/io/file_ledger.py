"""What each ingested landing file held, so a file dropped again can be told apart from a file replaced.

Spark's file source logs each path it read with its modification time and never reads a path again. A producer
that drops the same file again (same bytes, new modification time) is harmless; one that replaces a file with new
content would lose that content without a word. The ledger (`<checkpoint>/tributary_files.json`) keeps the size
and SHA-256 of every ingested file, recorded when the file is first seen unchanged after its batch committed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from infra.files import write_atomically
from pipelines.io.file_source_log import SeenFile

LEDGER = "tributary_files.json"


@dataclass(frozen=True)
class Fingerprint:
    """A landed file's content as ingested: modification time (ms), size and SHA-256."""

    modified_ms: int
    size: int
    sha256: str


def modified_ms(path: Path) -> int:
    """A file's modification time in milliseconds, as Spark's file source records it."""
    return path.stat().st_mtime_ns // 1_000_000


def fingerprint(path: Path) -> Fingerprint:
    """The file's fingerprint now."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return Fingerprint(modified_ms(path), path.stat().st_size, digest.hexdigest())


def load(checkpoint: Path) -> dict[str, Fingerprint]:
    """The ledger of the stream at `checkpoint` (empty before its first run)."""
    path = checkpoint / LEDGER
    if not path.is_file():
        return {}
    return {name: Fingerprint(**entry) for name, entry in json.loads(path.read_text()).items()}


def save(checkpoint: Path, ledger: dict[str, Fingerprint]) -> None:
    """Write the ledger atomically."""
    write_atomically(checkpoint / LEDGER, json.dumps({name: asdict(f) for name, f in sorted(ledger.items())}))


def unchanged(ledger: dict[str, Fingerprint], seen: SeenFile, path: Path) -> bool:
    """Whether `path` still holds what was ingested as `seen`; records what is learned in `ledger`.

    A file whose modification time is the one Spark logged is unchanged, and its fingerprint is recorded; one
    with another time is unchanged only if its size and hash equal the recorded ones (dropped again).
    """
    now = modified_ms(path)
    known = ledger.get(seen.path)
    if known is not None and known.modified_ms == now:
        return True
    if now == seen.modified_ms:
        ledger[seen.path] = fingerprint(path)
        return True
    if known is None:
        return False
    current = fingerprint(path)
    if (current.size, current.sha256) != (known.size, known.sha256):
        return False
    ledger[seen.path] = current
    return True


def record_unchanged(ledger: dict[str, Fingerprint], files: Iterable[tuple[SeenFile, Path]]) -> None:
    """`unchanged` for each (seen, path), the files hashed in parallel (hashlib releases the GIL while it hashes)."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(lambda item: unchanged(ledger, *item), files))
