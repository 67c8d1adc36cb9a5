"""Delta Lake maintenance with delta-rs: the same policy and operations as Iceberg, carried out the Delta way.

- `rewrite_data_files` → OPTIMIZE: bin-pack small files toward the target size (Z-order by the policy's sort
  columns when it has a sort order; Z-order has no direction). Its commit has `dataChange=false`, so downstream
  streams (delta-spark's source) read nothing from it.
- `rewrite_manifests` → a log checkpoint: Delta's compacted metadata, which readers start from.
- `expire_snapshots` → VACUUM of files removed longer ago than the retention, keeping the files of every version a
  downstream consumer still needs: the version it has read up to (reconciliation reads it) and every later one (it
  still has to read their appended files, even those OPTIMIZE has since compacted away).
- `remove_orphan_files` → VACUUM in full mode: also files that no version references (the files of a write killed
  before its commit) and staged files never published, never younger than 24 hours, because the files of a commit
  still in flight look exactly like them.
Delta keeps versions by time only, so `min_snapshots_to_keep` has no equivalent.
"""

from __future__ import annotations

import json
import shutil
import time
from datetime import datetime, timedelta

import pyarrow as pa
from deltalake import DeltaTable

from infra.errors import ConfigError
from infra.settings import Settings
from pipelines.io.delta import STAGING_DIR, DeltaFormat
from pipelines.ops.maintenance.shape import TableShape, bytes_on_disk
from pipelines.spec.registry import Registry
from pipelines.spec.tables import MaintenancePolicy

MB = 1024 * 1024
ORPHAN_MINIMUM_AGE = timedelta(hours=24)


def _table(settings: Settings, name: str) -> tuple[DeltaFormat, DeltaTable]:
    fmt = DeltaFormat(settings)
    return fmt, fmt.delta_table(name)


def optimize(settings: Settings, name: str, policy: MaintenancePolicy) -> dict[str, int]:
    """Compact small files (Z-order with a sort order) once at least `min_input_files` files are smaller than the
    target; the result uses Iceberg's result names so both formats plot alike."""
    policy.validate(name)
    _, dt = _table(settings, name)
    target = policy.target_file_size_mb * MB
    sizes = [int(s) for s in _adds(dt).get("size_bytes", [])]
    if sum(1 for s in sizes if s < target) < policy.min_input_files:
        return {"rewritten_data_files_count": 0, "added_data_files_count": 0, "rewritten_bytes_count": 0}
    if policy.sort_order:
        metrics = dt.optimize.z_order([item.split()[0] for item in policy.sort_order], target_size=target)
    else:
        metrics = dt.optimize.compact(target_size=target)
    return {
        "rewritten_data_files_count": int(metrics.get("numFilesRemoved", 0)),
        "added_data_files_count": int(metrics.get("numFilesAdded", 0)),
        "rewritten_bytes_count": int(json.loads(metrics.get("filesRemoved") or "{}").get("totalSize", 0)),
    }


def checkpoint(settings: Settings, name: str) -> dict[str, int]:
    """Write a checkpoint of the log at the current version."""
    _, dt = _table(settings, name)
    dt.create_checkpoint()
    return {"checkpoint_version": dt.version()}


def needed_versions(settings: Settings, registry: Registry, name: str) -> tuple[list[int], list[str]]:
    """The versions whose files downstream consumers still need, and a note per consumer."""
    fmt, dt = _table(settings, name)
    current = dt.version()
    oldest = current
    notes = []
    for spec in registry.downstream_of(name):
        position = fmt.consumer_position(name, spec.name, settings.checkpoint_for(spec.name))
        start = 0 if position.snapshot_id is None else int(position.snapshot_id)
        oldest = min(oldest, start)
        notes.append(f"consumer {spec.name} has read {name} up to version {position.snapshot_id}; kept from {start}")
    return list(range(oldest, current + 1)), notes


def vacuum(
    settings: Settings,
    registry: Registry,
    name: str,
    policy: MaintenancePolicy,
    now: datetime,
    older_than: datetime | None = None,
    *,
    full: bool = False,
) -> tuple[dict[str, int], list[str]]:
    """Delete files removed before the retention (`full`: also unreferenced files and stale staged files, never
    younger than 24 hours), keeping every version a downstream consumer needs; return counts and notes."""
    policy.validate(name)
    if older_than is not None and older_than.tzinfo is None:
        raise ConfigError(f"maintenance times must be timezone-aware, got {older_than!r}")
    days = policy.orphan_retention_days if full else policy.snapshot_retention_days
    age = now - older_than if older_than is not None else timedelta(days=days)
    if full and age < ORPHAN_MINIMUM_AGE:
        raise ConfigError(
            f"table {name}: orphan files younger than 24 hours cannot be removed (a commit in flight looks the "
            "same); pick a time at least 24 hours ago"
        )
    fmt, dt = _table(settings, name)
    keep, notes = needed_versions(settings, registry, name)
    hours = max(int(age.total_seconds() // 3600), 0)
    deleted = dt.vacuum(
        retention_hours=hours, dry_run=False, enforce_retention_duration=False, keep_versions=keep, full=full
    )
    staged = _remove_stale_staging(fmt, name, age) if full else 0
    return {"deleted_data_files_count": len(deleted), "deleted_staged_writes_count": staged}, notes


def _remove_stale_staging(fmt: DeltaFormat, name: str, age: timedelta) -> int:
    """Staged writes never published (their run was killed), older than `age`."""
    root = fmt.location(name) / STAGING_DIR
    if not root.is_dir():
        return 0
    cutoff = time.time() - age.total_seconds()
    removed = 0
    for folder in root.iterdir():
        if folder.stat().st_mtime < cutoff:
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    return removed


def _adds(dt: DeltaTable) -> dict[str, list]:
    return pa.table(dt.get_add_actions(flatten=True)).to_pydict()


def delta_shape(settings: Settings, name: str) -> TableShape:
    """Data files, sizes and rows from the current version's add actions; `snapshots` counts the log's commits and
    `manifests` its checkpoints."""
    fmt, dt = _table(settings, name)
    adds = _adds(dt)
    sizes = [int(s) for s in adds.get("size_bytes", [])]
    log = fmt.location(name) / "_delta_log"
    return TableShape(
        data_files=len(sizes),
        data_bytes=sum(sizes),
        avg_file_bytes=sum(sizes) // len(sizes) if sizes else 0,
        manifests=sum(1 for _ in log.glob("*.checkpoint.parquet")),
        snapshots=sum(1 for _ in log.glob("*.json")),
        rows=sum(int(n or 0) for n in adds.get("num_records", [])),
        bytes_on_disk=bytes_on_disk(str(fmt.location(name))),
    )
