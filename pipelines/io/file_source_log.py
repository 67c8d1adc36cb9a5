"""What a file-source stream's checkpoint says it has planned and committed: its source log, by canonical path."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from infra.paths import canonical_all
from pipelines.io.checkpoints import last_committed_batch


@dataclass(frozen=True)
class SeenFile:
    """A file a file-source stream has planned into a batch, as its source log records it."""

    path: str  # canonical local path (see infra.paths.canonical)
    modified_ms: int
    batch_id: int


def seen_files(checkpoint: Path, source: int | None = 0) -> dict[str, SeenFile]:
    """Every file the file source `source` (None: every file source) of the query at `checkpoint` has planned, by
    canonical path.

    Spark's file source logs each batch's files in `sources/<i>/<n>` (JSON lines after a version line) and
    compacts them every few batches into `<n>.compact`; it never reads a logged path again.
    """
    logs = sorted((checkpoint / "sources").glob("*")) if source is None else [checkpoint / "sources" / str(source)]
    logged = sorted(
        (p for log in logs if log.is_dir() for p in log.iterdir() if p.name.removesuffix(".compact").isdigit()),
        key=lambda p: (p.parent.name, int(p.name.removesuffix(".compact"))),
    )
    if not logged:
        return {}
    # A run reads the log several times (skip check, landing checks, all read): parse it again only if it changed.
    state = (str(checkpoint), source, tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in logged))
    if _seen_cache and _seen_cache[0][0] == state:
        return dict(_seen_cache[0][1])
    entries = []
    for path in logged:
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("{") and '"path"' in line:
                entries.append(json.loads(line))
    names = canonical_all(entry["path"] for entry in entries)
    out = {
        name: SeenFile(name, int(entry.get("timestamp", 0)), int(entry.get("batchId", 0)))
        for name, entry in zip(names, entries, strict=True)
    }
    _seen_cache[:] = [(state, dict(out))]
    return out


_seen_cache: list[tuple[tuple, dict[str, SeenFile]]] = []


def committed_files(checkpoint: Path) -> set[str]:
    """Files the file source of the query at `checkpoint` has read in committed batches (canonical paths)."""
    last = last_committed_batch(checkpoint)
    if last is None:
        return set()
    return {name for name, entry in seen_files(checkpoint).items() if entry.batch_id <= last}
