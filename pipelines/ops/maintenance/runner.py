"""Applying a table's maintenance policy: the chosen operations in order, the table's shape before and after."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pyspark.sql import SparkSession

from infra.errors import ConfigError
from infra.settings import Settings
from pipelines.io.formats import table_format
from pipelines.ops.maintenance import delta
from pipelines.ops.maintenance.cleanup import expire_with_protection, remove_orphan_files
from pipelines.ops.maintenance.compaction import rewrite_data_files, rewrite_manifests
from pipelines.ops.maintenance.policies import policy_for
from pipelines.ops.maintenance.procedures import (
    EXPIRE_SNAPSHOTS,
    OPERATIONS,
    REMOVE_ORPHAN_FILES,
    REWRITE_DATA_FILES,
    REWRITE_MANIFESTS,
)
from pipelines.ops.maintenance.shape import TableShape, bytes_on_disk, table_location, table_shape
from pipelines.spec.registry import Registry
from pipelines.spec.tables import MaintenancePolicy


@dataclass
class MaintenanceReport:
    """What one maintenance run did to one table."""

    table: str
    operations: tuple[str, ...]
    before: TableShape | None = None
    after: TableShape | None = None
    seconds: float = 0.0
    steps: dict[str, dict[str, int]] = field(default_factory=dict)
    step_seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None

    def numbers(self) -> dict[str, int | float]:
        """Flat numbers for Dagster metadata: `<shape>_before`, `<shape>_after`, `<operation>_<result>`."""
        out: dict[str, int | float] = {"seconds": self.seconds}
        for suffix, shape in (("before", self.before), ("after", self.after)):
            if shape is None:
                continue
            for key, value in vars(shape).items():
                if value is not None:
                    out[f"{key}_{suffix}"] = value
        for op, result in self.steps.items():
            for key, value in result.items():
                out[f"{op}_{key}"] = value
        for op, seconds in self.step_seconds.items():
            out[f"{op}_seconds"] = seconds
        return out


def compact_data_files(
    spark: SparkSession | None, settings: Settings, name: str, policy: MaintenancePolicy
) -> dict[str, int]:
    """Compact `name`'s small files with `policy` in its table format (Iceberg: rewrite_data_files, with a Spark
    session; Delta: OPTIMIZE through delta-rs)."""
    if table_format(settings).format_of(name) == "delta":
        return delta.optimize(settings, name, policy)
    assert spark is not None, "Iceberg compaction runs in Spark"
    return rewrite_data_files(spark, settings, name, policy)


def run_maintenance(
    spark: SparkSession,
    settings: Settings,
    registry: Registry,
    name: str,
    operations: Sequence[str] = OPERATIONS,
    *,
    now: datetime | None = None,
    expire_older_than: datetime | None = None,
    retain_last: int | None = None,
    orphan_older_than: datetime | None = None,
) -> MaintenanceReport:
    """Apply `name`'s maintenance policy: the chosen operations in the order compact, manifests, expire, orphans.

    The overrides (`expire_older_than`, `retain_last`, `orphan_older_than`) replace the policy's retention for
    this run; stream protection and the 24-hour orphan minimum still apply.
    """
    unknown = [op for op in operations if op not in OPERATIONS]
    if unknown:
        raise ConfigError(f"unknown maintenance operation(s) {unknown}; choose from {OPERATIONS}")
    policy = policy_for(registry, name)
    now = now or datetime.now(UTC)
    chosen = tuple(op for op in OPERATIONS if op in operations)
    report = MaintenanceReport(table=name, operations=chosen)
    started = time.perf_counter()
    if not table_format(settings).exists(spark, name):
        report.skipped = f"table {name} does not exist yet: nothing to maintain"
        return report
    if table_format(settings).format_of(name) == "delta":
        _run_delta(settings, registry, report, policy, now, expire_older_than, orphan_older_than)
        report.seconds = round(time.perf_counter() - started, 3)
        return report
    location = table_location(spark, settings, name)
    report.before = table_shape(spark, settings, name, location)
    for op in chosen:
        disk = bytes_on_disk(location, settings.object_store)
        t0 = time.perf_counter()
        if op == REWRITE_DATA_FILES:
            result = compact_data_files(spark, settings, name, policy)
        elif op == REWRITE_MANIFESTS:
            result = rewrite_manifests(spark, settings, name)
        elif op == EXPIRE_SNAPSHOTS:
            result, protection = expire_with_protection(
                spark, settings, registry, name, policy, now, expire_older_than, retain_last, ()
            )
            report.notes.extend(protection.notes)
        else:
            result = remove_orphan_files(spark, settings, name, policy, now=now, older_than=orphan_older_than)
        report.step_seconds[op] = round(time.perf_counter() - t0, 3)
        after_disk = bytes_on_disk(location, settings.object_store)
        if disk is not None and after_disk is not None and op in (EXPIRE_SNAPSHOTS, REMOVE_ORPHAN_FILES):
            result["bytes_freed"] = max(disk - after_disk, 0)
        report.steps[op] = result
    report.after = table_shape(spark, settings, name, location)
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _run_delta(
    settings: Settings,
    registry: Registry,
    report: MaintenanceReport,
    policy: MaintenancePolicy,
    now: datetime,
    expire_older_than: datetime | None,
    orphan_older_than: datetime | None,
) -> None:
    """The same operations on a Delta table (`pipelines.ops.maintenance.delta` says how each maps)."""
    name = report.table
    report.before = delta.delta_shape(settings, name)
    for op in report.operations:
        t0 = time.perf_counter()
        disk = report.before.bytes_on_disk if not report.steps else delta.delta_shape(settings, name).bytes_on_disk
        if op == REWRITE_DATA_FILES:
            result = compact_data_files(None, settings, name, policy)
        elif op == REWRITE_MANIFESTS:
            result = delta.checkpoint(settings, name)
        else:
            full = op == REMOVE_ORPHAN_FILES
            older = orphan_older_than if full else expire_older_than
            result, notes = delta.vacuum(settings, registry, name, policy, now, older, full=full)
            report.notes.extend(notes)
            after_disk = delta.delta_shape(settings, name).bytes_on_disk
            if disk is not None and after_disk is not None:
                result["bytes_freed"] = max(disk - after_disk, 0)
        report.step_seconds[op] = round(time.perf_counter() - t0, 3)
        report.steps[op] = result
    report.after = delta.delta_shape(settings, name)
