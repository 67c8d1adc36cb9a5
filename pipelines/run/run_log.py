"""The run log `ops.run_log`: one row per table run (and per flow of a table fed by several), failures included.

Writing it never needs a JVM and never fails a run. A table run leaves a pending row as a JSON file under
`<home>/run_log/pending/`; `fold` appends the pending rows to the table in one commit (pyiceberg on an Iceberg
home, delta-rs on a Delta home) and then removes their files. A row whose `log_id` the table already holds is not
appended again, so a fold killed between its commit and the removal of its files adds nothing twice.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from infra.errors import first_line
from infra.settings import Settings
from pipelines.sources.report import RunReport
from pipelines.write.ranges import RangeReport

RUN_LOG = "ops.run_log"
SCHEMA = pa.schema(
    [
        ("log_id", pa.string()),
        ("run_id", pa.string()),
        ("trigger", pa.string()),
        ("table_name", pa.string()),
        ("flow", pa.string()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("started_at", pa.timestamp("us", tz="UTC")),
        ("ended_at", pa.timestamp("us", tz="UTC")),
        ("seconds", pa.float64()),
        ("rows_in", pa.int64()),
        ("rows_written", pa.int64()),
        ("rows_quarantined", pa.int64()),
        ("rows_late", pa.int64()),
        ("rows_rescued", pa.int64()),
        ("rows_corrupt", pa.int64()),
        ("files_read", pa.int64()),
        ("files_rejected", pa.int64()),
        ("batches", pa.int64()),
        ("snapshot_id", pa.string()),
        ("stage_seconds", pa.string()),
    ]
)


@dataclass(frozen=True)
class RunContext:
    """Who runs the tables: the run's id (Dagster's run id under Dagster) and what started it."""

    run_id: str
    trigger: str


_CONTEXT: ContextVar[RunContext | None] = ContextVar("tributary_run_context", default=None)


@contextmanager
def run_context(run_id: str | None = None, trigger: str = "cli") -> Iterator[RunContext]:
    """Name the run of the tables run inside; an enclosing context wins (a Dagster run calling the pipeline)."""
    current = _CONTEXT.get()
    if current is not None:
        yield current
        return
    context = RunContext(run_id or uuid.uuid4().hex, trigger)
    token = _CONTEXT.set(context)
    try:
        yield context
    finally:
        _CONTEXT.reset(token)


def pending_dir(settings: Settings) -> Path:
    """Where table runs leave their rows until they are folded into the table."""
    return settings.home / "run_log" / "pending"


def _metric(report: RunReport, key: str) -> int:
    return int(report.metrics.get(key, 0))


def _row(context: RunContext, table: str, flow: str | None, report: RunReport | None, **fixed: Any) -> dict:
    row: dict[str, Any] = {"run_id": context.run_id, "trigger": context.trigger, "table_name": table, "flow": flow}
    row["log_id"] = f"{context.run_id}/{table}/{flow or ''}"
    row.update(fixed)
    if report is not None:
        stats = report.tables.get(table)
        row.update(
            seconds=report.seconds,
            rows_in=report.rows_in,
            rows_written=report.rows_written(table) if table in report.tables else 0,
            rows_quarantined=_metric(report, "rows_quarantined"),
            rows_late=_metric(report, "rows_late"),
            rows_rescued=_metric(report, "rows_rescued"),
            rows_corrupt=_metric(report, "rows_corrupt"),
            files_read=_metric(report, "files_read"),
            files_rejected=_metric(report, "files_rejected"),
            batches=report.batches,
            snapshot_id=str(stats.snapshot_id) if stats and stats.snapshot_id is not None else None,
            stage_seconds=json.dumps(report.stages, sort_keys=True) if report.stages else None,
        )
    return row


def record(
    settings: Settings,
    table: str,
    started: datetime,
    report: RunReport | None = None,
    error: BaseException | None = None,
) -> None:
    """Leave the pending rows of one table run: the table's, and one per flow when several feed it. A row that
    cannot be written is reported in one warning line: the run log never fails the run it records."""
    context = _CONTEXT.get() or RunContext(uuid.uuid4().hex, "cli")
    status = "failed" if error is not None else ("skipped" if report is not None and report.skipped else "succeeded")
    times = {
        "started_at": started.isoformat(),
        "ended_at": datetime.now(UTC).isoformat(),
        "status": status,
        "error": first_line(error) if error is not None else None,
    }
    rows = [_row(context, table, None, report, **times)]
    if report is not None:
        for name, flow in report.flows.items():
            flow_times = {**times, "status": "skipped" if flow.skipped else "succeeded"}
            rows.append(_row(context, table, name, flow, **flow_times))
    _leave(settings, rows, f"{table}'s run")


def logged_operation(settings: Settings, table: str, operation: str, work: Callable[[], RangeReport]) -> RangeReport:
    """Run `work`, an operation on `table`'s days (a backfill or a reprocess, from the CLI or the Dagster UI), and
    leave its row, failed or not: its `trigger` is the run's, then `:` and the operation; `rows_written` the
    range's rows after it. Like `record`, the log never fails the operation."""
    context = _CONTEXT.get() or RunContext(uuid.uuid4().hex, "cli")
    row: dict[str, Any] = {
        "log_id": f"{context.run_id}/{table}/{operation}",
        "run_id": context.run_id,
        "trigger": f"{context.trigger}:{operation}",
        "table_name": table,
        "flow": None,
        "started_at": datetime.now(UTC).isoformat(),
    }
    try:
        report = work()
    except Exception as exc:
        row.update(status="failed", error=first_line(exc), ended_at=datetime.now(UTC).isoformat())
        _leave(settings, [row], f"{table}'s {operation}")
        raise
    row.update(status="succeeded", ended_at=datetime.now(UTC).isoformat(), seconds=report.seconds)
    row.update(
        rows_written=report.rows_after, snapshot_id=None if report.snapshot_id is None else str(report.snapshot_id)
    )
    _leave(settings, [row], f"{table}'s {operation}")
    return report


def _leave(settings: Settings, rows: list[dict], what: str) -> None:
    """Write `rows` as pending files (a reader sees a whole file or none); a failure is one warning line."""
    try:
        folder = pending_dir(settings)
        folder.mkdir(parents=True, exist_ok=True)
        for row in rows:
            name = uuid.uuid4().hex
            tmp = folder / f".{name}.tmp"
            tmp.write_text(json.dumps(row))
            os.replace(tmp, folder / f"{name}.json")
    except OSError as exc:
        print(f"tributary: warning: {what} not logged ({first_line(exc)})", file=sys.stderr)


def _pending(settings: Settings) -> list[tuple[Path, dict]]:
    found = []
    for path in sorted(pending_dir(settings).glob("*.json")):
        try:
            found.append((path, json.loads(path.read_text())))
        except (OSError, ValueError):
            continue  # removed by a concurrent fold, or not ours
    return found


def _arrow(rows: list[dict]) -> pa.Table:
    columns: dict[str, list] = {name: [] for name in SCHEMA.names}
    for row in rows:
        for name in SCHEMA.names:
            value = row.get(name)
            if name in ("started_at", "ended_at") and value is not None:
                value = datetime.fromisoformat(value)
            columns[name].append(value)
    return pa.table(columns, schema=SCHEMA)


def _append_new(settings: Settings, rows: list[dict]) -> int:
    """Append the rows whose log_id the table does not hold yet, in one commit; how many were appended."""
    from infra.sql.delta_tables import delta_location

    ids = [row["log_id"] for row in rows]
    folder = delta_location(settings, RUN_LOG)
    # In the home's format, or the one it was created in; decided without asking Spark (which on a cluster would
    # start an application just for this).
    if (folder / "_delta_log").is_dir() or settings.table_format == "delta":
        from deltalake import DeltaTable, write_deltalake

        held: set[str] = set()
        if (folder / "_delta_log").is_dir():
            dataset = DeltaTable(str(folder)).to_pyarrow_dataset()
            found = dataset.to_table(columns=["log_id"], filter=ds.field("log_id").isin(ids))
            held = set(found["log_id"].to_pylist())
        new = [row for row in rows if row["log_id"] not in held]
        if new:
            folder.mkdir(parents=True, exist_ok=True)
            write_deltalake(str(folder), _arrow(new), mode="append")
        return len(new)
    from pyiceberg.expressions import In

    from infra.catalog import pyiceberg_catalog

    catalog = pyiceberg_catalog(settings)
    catalog.create_namespace_if_not_exists("ops")
    table = catalog.create_table_if_not_exists(RUN_LOG, schema=SCHEMA)
    held = set(table.scan(row_filter=In("log_id", ids), selected_fields=("log_id",)).to_arrow()["log_id"].to_pylist())
    new = [row for row in rows if row["log_id"] not in held]
    if new:
        table.append(_arrow(new))
    return len(new)


def fold(settings: Settings) -> int:
    """Append every pending row to `ops.run_log` exactly once and remove their files; how many were appended."""
    folder = pending_dir(settings)
    if not folder.is_dir():
        return 0
    with open(folder.parent / ".fold.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one fold at a time: two would both find the same rows new
        pending = _pending(settings)
        if not pending:
            return 0
        appended = _append_new(settings, [row for _, row in pending])
        for path, _ in pending:
            path.unlink(missing_ok=True)
        return appended


def fold_or_leave(settings: Settings) -> int:
    """`fold`, except that a failure leaves the rows pending for the next fold and prints one warning line."""
    try:
        return fold(settings)
    except Exception as exc:  # the run log must never fail the run it records
        print(f"tributary: warning: {RUN_LOG} not written yet, rows kept pending ({first_line(exc)})", file=sys.stderr)
        return 0
