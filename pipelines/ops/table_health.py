"""Cheap file statistics of a table from its metadata (no JVM), for the compaction sensor: Iceberg manifests via
pyiceberg, a Delta version's add actions via delta-rs."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.manifest import ManifestContent

from infra.catalog import pyiceberg_catalog
from infra.identifiers import validate_table_name
from infra.settings import Settings
from pipelines.io.delta import DeltaFormat
from pipelines.io.formats import table_format
from pipelines.spec.tables import MaintenancePolicy

MB = 1024 * 1024


@dataclass(frozen=True)
class FileHealth:
    """The current snapshot's data files: how many, how big, and how many compaction could merge."""

    table: str
    snapshot_id: int | None
    data_files: int
    data_bytes: int
    small_files: int
    compactable_files: int

    @property
    def avg_file_bytes(self) -> int:
        """Average data-file size in bytes (0 for an empty table)."""
        return self.data_bytes // self.data_files if self.data_files else 0


def file_health(settings: Settings, table: str, policy: MaintenancePolicy) -> FileHealth | None:
    """Read the current snapshot's manifests (not the data): None if the table does not exist yet.

    A file under `policy.small_file_mb` is small; small files are compactable when their partition holds at
    least `policy.min_input_files` of them (compaction never merges files across partitions).
    """
    ns, name = validate_table_name(table)
    if table_format(settings).format_of(table) == "delta":
        return _delta_file_health(settings, table, policy)
    try:
        tbl = pyiceberg_catalog(settings).load_table((ns, name))
    except NoSuchTableError:
        return None
    snapshot = tbl.current_snapshot()
    if snapshot is None:
        return FileHealth(table, None, 0, 0, 0, 0)
    small_limit = policy.small_file_mb * MB
    files = size = 0
    small_by_partition: dict[tuple[int, object], int] = defaultdict(int)
    for manifest in snapshot.manifests(tbl.io):
        if manifest.content != ManifestContent.DATA:
            continue
        for entry in manifest.fetch_manifest_entry(tbl.io, discard_deleted=True):
            data_file = entry.data_file
            files += 1
            size += data_file.file_size_in_bytes
            if data_file.file_size_in_bytes < small_limit:
                small_by_partition[(manifest.partition_spec_id, data_file.partition)] += 1
    small = sum(small_by_partition.values())
    compactable = sum(n for n in small_by_partition.values() if n >= policy.min_input_files)
    return FileHealth(table, snapshot.snapshot_id, files, size, small, compactable)


def _delta_file_health(settings: Settings, table: str, policy: MaintenancePolicy) -> FileHealth | None:
    """A Delta table is not partitioned: its small files are compactable once there are `min_input_files`."""
    fmt = DeltaFormat(settings)
    if not fmt.exists(None, table):
        return None
    dt = fmt.delta_table(table)
    sizes = [int(n) for n in pa.table(dt.get_add_actions(flatten=True)).column("size_bytes").to_pylist()]
    small = sum(1 for n in sizes if n < policy.small_file_mb * MB)
    compactable = small if small >= policy.min_input_files else 0
    return FileHealth(table, dt.version(), len(sizes), sum(sizes), small, compactable)


def compaction_reason(health: FileHealth, policy: MaintenancePolicy) -> str | None:
    """Why `health` calls for compaction under `policy`, or None when it does not."""
    if health.compactable_files == 0:
        return None
    if health.compactable_files > policy.max_small_files:
        return (
            f"{health.compactable_files} compactable small files (< {policy.small_file_mb} MB) exceed "
            f"max_small_files={policy.max_small_files}"
        )
    if health.avg_file_bytes < policy.min_avg_file_mb * MB:
        return (
            f"average data file {health.avg_file_bytes / MB:.2f} MB is under min_avg_file_mb={policy.min_avg_file_mb} "
            f"with {health.compactable_files} compactable small files"
        )
    return None
