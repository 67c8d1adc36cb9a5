"""A Delta table's versions as the snapshots, commit properties and history the runner asks every format for,
read from its log on the driver (no JVM)."""

from __future__ import annotations

from pathlib import Path

from infra.sql.delta_tables import Commit, read_commit
from infra.sql.table_metadata import Snapshot

# The commit info a batch's version carries (the Iceberg snapshot properties' names).
WRITER_KEY = "tributary.writer"
BATCH_KEY = "tributary.batch-id"


def as_snapshot(commit: Commit) -> Snapshot:
    """The version as a snapshot (id = version) with an Iceberg-like summary."""
    summary = {"operation": commit.operation, "added-data-files": str(len(commit.appended))}
    summary["added-records"] = str(commit.added_records)
    for key, value in commit.info.items():  # Tributary's keys (writer, batch id, ...), as Iceberg's summary holds them
        if key.startswith("tributary."):
            summary[key] = str(value)
    parent = commit.version - 1 if commit.version else None
    return Snapshot(commit.version, parent, commit.timestamp_ms, None, summary)


def last_data_commit(table: Path, current: int) -> Commit:
    """The newest version at or before `current` of the table at `table` that is not a compaction."""
    commit = read_commit(table, current)
    while commit.operation == "replace" and commit.version > 0:
        commit = read_commit(table, commit.version - 1)
    return commit


def latest_info(table: Path, current: int, key: str) -> dict[str, str] | None:
    """The commit info of the newest version at or before `current` that holds `key`."""
    version = current
    while version >= 0 and key not in (info := read_commit(table, version).info):
        version -= 1
    return None if version < 0 else {k: str(v) for k, v in info.items()}
