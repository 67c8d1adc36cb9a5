"""What a check reads, as versions: a check whose inputs have not changed since its last result is not run again.

A check's result is a function of the table snapshots it reads, the stream positions it compares with, the landed
files it counts and the suite it evaluates. Each is cheap to read (table metadata, checkpoint files, file
listings), so a no-op run of the pipeline re-reads these versions instead of re-scanning the tables.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import CodeType
from typing import TYPE_CHECKING

from infra.settings import Settings
from pipelines.io.checkpoints import restart_position
from pipelines.io.file_source_log import committed_files
from pipelines.io.formats import table_format
from pipelines.sources.base import flow_checkpoint
from pipelines.spec.tables import MAIN_FLOW
from quality.results import CheckResult, latest_result

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def digest(value: object) -> str:
    """A short, stable digest of a value's repr (declared suites and rules are frozen dataclasses)."""
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def code_version(function: object) -> str:
    """A digest of a Python function's compiled code, names and constants ("" for anything else), equal across
    processes (nested code objects and sets are spelled out, not repr'd with addresses or hash order)."""
    code = getattr(function, "__code__", None)
    return "" if code is None else digest(_code_parts(code))


def _code_parts(code: CodeType) -> tuple:
    consts = []
    for value in code.co_consts:
        if isinstance(value, CodeType):
            consts.append(_code_parts(value))
        elif isinstance(value, frozenset):
            consts.append(tuple(sorted(map(repr, value))))
        else:
            consts.append(value)
    return (code.co_code, tuple(consts), code.co_names)


def snapshot_versions(spark: SparkSession | None, settings: Settings, tables: list[str]) -> dict[str, str]:
    """`snapshot:<table>` → the table's current snapshot id ("none" before its first commit)."""
    fmt = table_format(settings)
    out = {}
    for table in tables:
        snapshot = fmt.current_snapshot(spark, table)
        out[f"snapshot:{table}"] = snapshot_version(None if snapshot is None else snapshot.snapshot_id)
    return out


def snapshot_version(snapshot_id: int | None) -> str:
    """How an input names a table's snapshot ("none" before its first commit)."""
    return "none" if snapshot_id is None else str(snapshot_id)


def position_version(settings: Settings, consumer: str) -> dict[str, str]:
    """`position:<consumer>` → where the consumer's stream restarts (snapshot, batch, committed)."""
    position = restart_position(consumer, settings.checkpoint_for(consumer))
    return {f"position:{consumer}": f"{position.snapshot_id}/{position.batch_id}/{position.committed}"}


def files_version(key: str, files: dict[str, Path]) -> dict[str, str]:
    """`files:<key>` → a digest of each file's name, size and modification time."""
    listed = []
    for name, path in sorted(files.items()):
        try:
            stat = path.stat()
            listed.append((name, stat.st_size, stat.st_mtime_ns))
        except OSError:
            listed.append((name, -1, -1))
    return {f"files:{key}": digest(listed)}


def read_files_version(settings: Settings, table: str, flow: str = MAIN_FLOW) -> dict[str, str]:
    """`read:<table>` (`read:<table>/<flow>` for a further flow) → a digest of the files the table's stream (its
    flow `flow`) has read in committed batches."""
    key = f"read:{table}" if flow == MAIN_FLOW else f"read:{table}/{flow}"
    return {key: digest(sorted(committed_files(flow_checkpoint(settings, table, flow))))}


def oldest_allowed(within: timedelta) -> datetime:
    """The oldest newest-value a freshness expectation accepts now, as Spark returns timestamps: naive local."""
    return datetime.now(UTC).astimezone().replace(tzinfo=None) - within


def _still_fresh(observed: str | None, within: timedelta) -> bool:
    """Whether a freshness outcome that passed with newest value `observed` would pass again now."""
    try:
        newest = datetime.fromisoformat((observed or "").split(" (", 1)[0].strip())
    except ValueError:
        return False
    return newest.replace(tzinfo=None) >= oldest_allowed(within)


def carried_over(
    settings: Settings,
    table: str,
    check: str,
    inputs: dict[str, str],
    clock_dependent: Mapping[str, timedelta] | None = None,
) -> CheckResult | None:
    """The latest result of `check` on `table` when it read exactly `inputs`, noted as carried over; else None.

    `clock_dependent` names the outcomes that also depend on the time (freshness) with their allowed age. While
    the inputs are unchanged, the newest value is too: a passed one is carried over until that value grows older
    than its allowed age, and then checked again (and fails); a failed one stays failed.
    """
    clock_dependent = clock_dependent or {}
    result = latest_result(settings, table, check)
    if result is None or not result.inputs or result.inputs != inputs:
        return None
    for outcome in result.outcomes:
        within = clock_dependent.get(outcome.name)
        if outcome.success and within is not None and not _still_fresh(outcome.observed, within):
            return None
    return replace(result, carried_over_at=datetime.now(UTC).isoformat(timespec="seconds"))
