"""delta-spark's streaming source: what its offsets say was read, and where a new stream starts.

A stream that has committed nothing yet starts from version 0 (`startingVersion`) when the table's versions replay
to its rows (`replays_from_start`): delta-spark then reads the files the versions added, where its default start
builds the table's snapshot first (1.5-2.5 s of small Spark jobs per new stream). A first batch run again after a
crash reads what its first attempt planned either way: a log that stopped replaying since then gained versions
after that plan's end, and a snapshot up to that end holds exactly the rows its versions added; only a plan that
stopped inside a snapshot (an offset into the snapshot's files) needs the snapshot again.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from deltalake import DeltaTable

from infra.sql.delta_tables import commit_file, data_path, read_commit
from pipelines.io.checkpoints import batch_files, last_committed_batch, pending_batch, settled_offsets, source_offsets

# delta-spark's DeltaSourceOffset.END_INDEX (Long.MaxValue - 100): every file of the offset's version was read.
_END_INDEX = 2**63 - 1 - 100
# A new stream reads a table's versions one by one (`replays_from_start`) when the log holds at most this many: each
# is a commit file read on the driver.
_REPLAY_VERSIONS = 100


def replays_from_start(path: Path, current: int) -> bool:
    """Whether the table's versions 0 to `current`, read one by one, give exactly its current rows, from files that
    still exist: every version is still in the log (none cleaned up after a checkpoint), none after the first sets
    the schema (delta-spark stops a stream that meets a schema change), and none removes a file: no overwrite,
    delete or MERGE (whose versions a stream skipping change commits would skip, dropping their rows) and no
    compaction (whose replaced files a vacuum may have deleted)."""
    if current > _REPLAY_VERSIONS:
        return False
    for version in range(current + 1):
        if not commit_file(path, version).is_file():
            return False
        commit = read_commit(path, version)
        if commit.removes or (commit.metadata and version > 0):
            return False
    return True


def version_read(offset: Mapping[str, object]) -> int:
    """The newest version a Delta source offset says is fully read: v with the end index, else v - 1."""
    version, index = int(offset["reservoirVersion"]), int(offset.get("index", -1))  # type: ignore[call-overload]
    return version if index >= _END_INDEX else version - 1


def read_up_to(table_id: str, offsets: list[dict]) -> int | None:
    """The newest version the Delta source offset of the table `table_id` among `offsets` (one per source of a
    query) says is fully read: (v, base index) means every version before v; (v, END_INDEX) means v as well."""
    found = [o for o in offsets if o.get("reservoirId") == table_id and "reservoirVersion" in o]
    return version_read(found[0]) if found else None


def stream_caught_up(checkpoint: Path, path: Path, table_id: str, current: int) -> bool:
    """The stream at `checkpoint` owes nothing, and no version of the table at `path` (id `table_id`, current
    version `current`) after the one it has fully read appended rows."""
    settled = settled_offsets(checkpoint)
    read = read_up_to(table_id, settled) if settled is not None else None
    if read is None:
        return settled is None and not any(read_commit(path, v).appended for v in range(current + 1))
    return not any(read_commit(path, v).appended for v in range(read + 1, current + 1))


def new_stream_replays(checkpoint: Path, path: Path, table: DeltaTable) -> bool:
    """Whether the stream at `checkpoint` has committed no batch (else it resumes from its offsets), planned none
    inside the snapshot of the table at `path`, and the table's versions replay to its rows."""
    if last_committed_batch(checkpoint) is not None:
        return False
    pending = pending_batch(checkpoint)
    planned = source_offsets(batch_files(checkpoint / "offsets")[pending]) if pending is not None else []
    table_id = table.metadata().id
    if any(
        o.get("reservoirId") == table_id and o.get("isStartingVersion") and int(o.get("index", -1)) >= 0
        for o in planned
    ):
        return False
    return replays_from_start(path, table.version())


def replay_problem(path: Path, current: int) -> str | None:
    """Why a new stream could not replay the Delta table at `path` (current version `current`) from version 0: a
    version that overwrote or deleted rows (a reprocess), a commit the log no longer holds, or an appended file
    VACUUM has deleted; None when it can."""
    for version in range(current + 1):
        if not commit_file(path, version).is_file():
            return f"its log no longer holds version {version} (cleaned up after a checkpoint)"
        commit = read_commit(path, version)
        if commit.operation in ("overwrite", "delete"):
            return f"version {version} {commit.operation} rows in place (a reprocess)"
    for version in range(current + 1):
        gone = [f for a in read_commit(path, version).appended if not (f := data_path(path, a)).exists()]
        if gone:
            return f"VACUUM deleted its appended file {gone[0]}"
    return None
