"""Where a table that follows its upstreams' changes (`pipelines.sources.table_changes`) has read them up to: the
commit (snapshot id; Delta: version) of each upstream its last committed run had brought it up to date with, and
that run's batch number, in `changes_read.json` in the table's checkpoint folder.

The file is written after the table's commit. A run killed between the two reads the same changes again and
writes the same rows: every strategy that follows changes recomputes what they touch from the upstream, so a
second pass changes nothing (`pipelines.write.follow`).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

from infra.files import write_atomically

LEDGER = "changes_read.json"
# The writer id of the table's commits, where Spark keeps a streaming query's (`checkpoints.query_id`).
_METADATA = "metadata"


@dataclass(frozen=True)
class ReadUpTo:
    """One upstream's position: its identity (a table created again has another) and its commit."""

    table_id: str
    commit: int | None


@dataclass(frozen=True)
class ChangesRead:
    """What the last committed run of a following table had read."""

    batch: int
    upstreams: dict[str, ReadUpTo]


def changes_read(checkpoint: Path) -> ChangesRead | None:
    """The positions the table's last committed run recorded; None before its first."""
    path = checkpoint / LEDGER
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    upstreams = {name: ReadUpTo(p["table_id"], p["commit"]) for name, p in data["upstreams"].items()}
    return ChangesRead(int(data["batch"]), upstreams)


def record_changes_read(checkpoint: Path, read: ChangesRead) -> None:
    """Record the positions once the run's commit is done."""
    upstreams = {name: {"table_id": p.table_id, "commit": p.commit} for name, p in read.upstreams.items()}
    write_atomically(checkpoint / LEDGER, json.dumps({"batch": read.batch, "upstreams": upstreams}, indent=1) + "\n")


def ensure_writer_id(checkpoint: Path) -> None:
    """Give the table's commits a writer id that survives restarts, as a streaming query's checkpoint does."""
    path = checkpoint / _METADATA
    if not path.is_file():
        write_atomically(path, json.dumps({"id": str(uuid.uuid4())}) + "\n")
