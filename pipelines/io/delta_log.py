"""The stream feed of a Delta table: what a downstream Spark query reads (commits are parsed by
`infra.sql.delta_tables.read_commit`).

Spark cannot stream from a Delta table without delta-spark. It can stream from a folder of Parquet files whose
`_spark_metadata` log (the one Spark's own file sink writes) lists exactly which files to read, in batches:
Spark's file source then reads only the listed files, each once per consumer checkpoint, with every streaming
feature (availableNow, watermarks, state). So each Delta table keeps such a log in its own folder: feed batch v
lists the data files that Delta version v appended (adds with `dataChange=true` in a commit that removed nothing).
A compaction (OPTIMIZE: `dataChange=false`), a MERGE, an overwrite or a delete lists none, exactly as the Iceberg
stream skips replace, overwrite and delete snapshots. The feed is a pure function of the Delta log, so writing it
again (after a crash, or from a consumer while the producer writes) writes the same bytes.

The feed's format is Spark's file-sink log: a version line `v1` and one JSON line per file; every tenth batch
(`(v + 1) % 10 == 0`, Spark's default compaction interval) is a `.compact` file that repeats every earlier entry.
"""

from __future__ import annotations

import json
from pathlib import Path

from infra.files import write_atomically
from infra.sql.delta_tables import data_path, read_commit

FEED_DIR = "_spark_metadata"
_COMPACT_INTERVAL = 10  # spark.sql.streaming.fileSink.log.compactInterval's default, which readers assume


def _feed_versions(table: Path) -> list[int]:
    folder = table / FEED_DIR
    if not folder.is_dir():
        return []
    return sorted(int(p.name.removesuffix(".compact")) for p in folder.iterdir() if p.name.split(".")[0].isdigit())


def _entry(table: Path, add: dict) -> dict:
    return {
        "path": data_path(table, add).as_uri(),
        "size": int(add["size"]),
        "isDir": False,
        "modificationTime": int(add["modificationTime"]),
        "blockReplication": 1,
        "blockSize": 33554432,
        "action": "add",
    }


def _read_feed(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()[1:] if line.strip()]


def _batch_path(table: Path, version: int) -> Path:
    suffix = ".compact" if (version + 1) % _COMPACT_INTERVAL == 0 else ""
    return table / FEED_DIR / f"{version}{suffix}"


def _listed_before(table: Path, version: int) -> list[dict]:
    """Every entry of feed batches before `version`: the newest compact batch before it, then the plain ones."""
    compact = version - 1 - version % _COMPACT_INTERVAL
    listed = _read_feed(_batch_path(table, compact)) if compact >= 0 else []
    for v in range(compact + 1, version):
        listed += _read_feed(_batch_path(table, v))
    return listed


def sync_feed(table: Path, current: int) -> None:
    """Write the feed batches of every version up to `current` that the feed lacks, oldest first (a reader never
    sees a gap), each atomically."""
    versions = _feed_versions(table)
    start = versions[-1] + 1 if versions else 0
    if start > current:
        return
    listed = _listed_before(table, start)
    for version in range(start, current + 1):
        entries = [_entry(table, add) for add in read_commit(table, version).appended]
        listed += entries
        compact = (version + 1) % _COMPACT_INTERVAL == 0
        body = listed if compact else entries
        write_atomically(_batch_path(table, version), "\n".join(["v1", *map(json.dumps, body)]))


def feed_files(table: Path) -> list[str]:
    """Every file URI the feed lists, oldest first."""
    versions = _feed_versions(table)
    return [e["path"] for e in _listed_before(table, versions[-1] + 1)] if versions else []


def feed_by_version(table: Path) -> dict[int, list[str]]:
    """The file URIs each version appended, from the feed itself (the Delta log's old commits may be cleaned up)."""
    out: dict[int, list[str]] = {}
    listed = 0
    for version in _feed_versions(table):
        entries = _read_feed(_batch_path(table, version))
        if (version + 1) % _COMPACT_INTERVAL == 0:  # a compact batch repeats every earlier entry first
            entries = entries[listed:]
        listed += len(entries)
        out[version] = [e["path"] for e in entries]
    return out
