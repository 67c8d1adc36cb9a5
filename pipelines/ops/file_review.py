"""Review of landed files: what a file-source table recorded per file, and acknowledging rejected files.

`<table>_files` is an append-only audit trail: each micro-batch appends one row per landed file
(`pipelines.sources.file_health.record`), and `acknowledge` appends one `acknowledged` row when a person has dealt with
a rejected file (its `reason` says who and why; `_batch_id` is NULL because no micro-batch wrote it, and no
counts are set, so sums over the table still count landed rows once). Nothing is ever updated or deleted.

Files are identified by their name, not their full path: a dataset's landing folder is flat, so a name is
unique per table, and an acknowledgement stays valid when `TRIBUTARY_LANDING` moves. Per name, the latest
health row (by `recorded_at`, then `_batch_id`) says what the file is; a rejected file is resolved by an
acknowledgement recorded at or after it, or by a later healthy row for the same name (a fixed copy landed under
the same name, e.g. after a full refresh). Everything else rejected is unresolved, and the blocking asset check
`landed_files` fails until it is not.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path, PurePath

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from infra.errors import TributaryError
from infra.files import write_atomically
from infra.settings import Settings
from infra.spark import Session, running_session, started_session
from pipelines.io.formats import table_format
from pipelines.run.locks import table_lock
from pipelines.sources.file_health import ACKNOWLEDGED, PROBLEM_STATUSES
from pipelines.spec.registry import Registry
from pipelines.spec.tables import TableSpec, files_output

# The writer an acknowledgement's append is tagged with.
ACK_WRITER = "tributary-files-ack"

REJECTED = "rejected"
WARNING_STATUSES = tuple(s for s in PROBLEM_STATUSES if s != REJECTED)


class FileReviewError(TributaryError):
    """A landed-file review command cannot do what was asked (unknown file, not rejected, already acknowledged)."""


@dataclass(frozen=True)
class FileRecord:
    """The latest recorded health of one landed file of a table, and its acknowledgement if any."""

    table: str
    file: str
    status: str
    rows: int | None
    corrupt_rows: int | None
    rescued_rows: int | None
    reason: str | None
    new_fields: tuple[str, ...]
    recorded_at: datetime | None
    batch_id: int | None
    acknowledgement: str | None = None

    @property
    def name(self) -> str:
        """The file's name: what identifies it within its table."""
        return file_name(self.file)

    @property
    def unresolved(self) -> bool:
        """Rejected and not acknowledged since."""
        return self.status == REJECTED and self.acknowledgement is None

    def ack_command(self) -> str:
        """The command that acknowledges this file."""
        return f"tributary files ack {self.table} {self.name}"


def file_name(text: str) -> str:
    """The name of a landed file given its name or its full path (either separator)."""
    return PurePath(text.replace("\\", "/")).name


def file_source_specs(registry: Registry) -> list[TableSpec]:
    """The specs that read landed files (each records per-file health in `<table>_files`)."""
    return [spec for spec in registry if spec.files_table is not None]


def require_file_source(registry: Registry, table: str) -> TableSpec:
    """The spec of `table`, or a one-line error naming the tables that read landed files."""
    spec = registry.get(table)
    if spec.files_table is None:
        names = ", ".join(s.name for s in file_source_specs(registry)) or "none"
        raise FileReviewError(f"table {table} does not read landed files; the tables that do: {names}")
    return spec


def file_rows(session: Session, settings: Settings, spec: TableSpec, problems_only: bool = False) -> list[FileRecord]:
    """One record per landed file of `spec` (latest health, with its acknowledgement), sorted by file name.

    `problems_only` keeps rejected, empty and header-only files. A table that has not been run yet has none.
    The records are kept per snapshot of `<table>_files` (every run and acknowledgement commits one), so asking
    again while it is unchanged reads them back and does not start `session` (`infra.spark.Session`).
    """
    if spec.files_table is None:
        return []
    fmt = table_format(settings)
    running = running_session(session)
    snapshot = fmt.current_snapshot(running, spec.files_table) if fmt.exists(running, spec.files_table) else None
    if snapshot is None:
        return []
    kept = settings.home / "cache" / "files" / f"{spec.files_table}.{'problems' if problems_only else 'all'}.json"
    records = _kept_records(kept, snapshot.snapshot_id)
    if records is None:
        records = _file_rows(started_session(session, settings), settings, spec, problems_only)
        _keep_records(kept, snapshot.snapshot_id, records)
    return records


def _kept_records(path: Path, snapshot_id: int) -> list[FileRecord] | None:
    try:
        kept = json.loads(path.read_text())
        if kept["snapshot_id"] != snapshot_id:
            return None
        return [
            FileRecord(
                **{
                    **r,
                    "new_fields": tuple(r["new_fields"]),
                    "recorded_at": datetime.fromisoformat(r["recorded_at"]) if r["recorded_at"] else None,
                }
            )
            for r in kept["records"]
        ]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _keep_records(path: Path, snapshot_id: int, records: list[FileRecord]) -> None:
    rows = [
        {
            **asdict(r),
            "recorded_at": r.recorded_at.isoformat() if r.recorded_at else None,
            "new_fields": list(r.new_fields),
        }
        for r in records
    ]
    with contextlib.suppress(OSError):  # a read-only home: read from the table next time
        write_atomically(path, json.dumps({"snapshot_id": snapshot_id, "records": rows}))


def _file_rows(spark: SparkSession, settings: Settings, spec: TableSpec, problems_only: bool) -> list[FileRecord]:
    frame = _files_frame(spark, settings, spec)
    if frame is None:
        return []
    named = frame.withColumn("_name", F.regexp_extract("file", r"[^/\\]+$", 0))
    latest = Window.partitionBy("_name").orderBy(F.col("recorded_at").desc_nulls_last(), F.col("_batch_id").desc())
    health = (
        named.filter(F.col("status") != ACKNOWLEDGED)
        .withColumn("_rank", F.row_number().over(latest))
        .filter("_rank = 1")
    )
    if problems_only:
        health = health.filter(F.col("status").isin(*PROBLEM_STATUSES))
    acks = (
        named.filter(F.col("status") == ACKNOWLEDGED)
        .groupBy("_name")
        .agg(F.max_by(F.struct("recorded_at", "reason"), "recorded_at").alias("_ack"))
    )
    acknowledged = F.col("_ack.recorded_at") >= F.col("recorded_at")
    rows = (
        health.join(acks, "_name", "left")
        .withColumn("_acknowledgement", F.when(acknowledged, F.col("_ack.reason")))
        .orderBy("_name")
        .collect()
    )
    return [
        FileRecord(
            table=spec.name,
            file=r["file"],
            status=r["status"],
            rows=r["rows"],
            corrupt_rows=r["corrupt_rows"],
            rescued_rows=r["rescued_rows"],
            reason=r["reason"],
            new_fields=tuple(r["new_fields"] or ()),
            recorded_at=r["recorded_at"],
            batch_id=r["_batch_id"],
            acknowledgement=r["_acknowledgement"],
        )
        for r in rows
    ]


def unresolved(spark: SparkSession, settings: Settings, spec: TableSpec) -> list[FileRecord]:
    """The rejected files of `spec` that nobody has acknowledged (nor replaced with a healthy file of that name)."""
    return [r for r in file_rows(spark, settings, spec, problems_only=True) if r.unresolved]


def acknowledge(
    spark: SparkSession, settings: Settings, spec: TableSpec, file: str, note: str | None, who: str
) -> FileRecord:
    """Record that `who` has dealt with the rejected file `file` (its name or path); return the file's record.

    Appends one `acknowledged` row to `<table>_files` under the table's writer lock, so it never interleaves
    with a run. Refuses, naming the table's unresolved rejected files, a file that was never rejected or is
    already acknowledged.
    """
    if spec.files_table is None:
        raise FileReviewError(f"table {spec.name} does not read landed files: there is nothing to acknowledge")
    name = file_name(file.strip())
    if not name or name in (".", ".."):
        raise FileReviewError(f"{file!r} is not a landed file name (e.g. orders-0001.json)")
    with table_lock(settings, spec.name, settings.lock_wait_seconds):
        records = {r.name: r for r in file_rows(spark, settings, spec)}
        record = records.get(name)
        if record is None:
            raise FileReviewError(f"{spec.name} has recorded no landed file named {name}; {_pending(records)}")
        if record.status != REJECTED:
            raise FileReviewError(
                f"{spec.name}: landing file {name} was not rejected (status {record.status}), so there is nothing "
                f"to acknowledge; {_pending(records)}"
            )
        if record.acknowledgement is not None:
            raise FileReviewError(
                f"{spec.name}: landing file {name} is already acknowledged ({record.acknowledgement}); "
                f"{_pending(records)}"
            )
        reason = _ack_reason(note, who)
        row = dict.fromkeys(files_output(spec.files_table).schema.names)
        row |= {"file": record.file, "status": ACKNOWLEDGED, "reason": reason, "recorded_at": datetime.now(UTC)}
        # Tagged like a batch (the acknowledgement's time as its id): Delta records it as an app transaction.
        table_format(settings).append_rows(spec.files_table, [row], ACK_WRITER, time.time_ns() // 1000)
    return replace(record, acknowledgement=reason)


def _files_frame(spark: SparkSession, settings: Settings, spec: TableSpec) -> DataFrame | None:
    if spec.files_table is None:
        return None
    fmt = table_format(settings)
    if not fmt.exists(spark, spec.files_table):
        return None
    return fmt.read(spark, spec.files_table)


def _ack_reason(note: str | None, who: str) -> str:
    # One line, so listings and check metadata stay readable whatever was typed.
    text = " ".join((note or "").split())
    by = " ".join(who.split()) or "unknown"
    return f"acknowledged by {by}: {text}" if text else f"acknowledged by {by}"


def _pending(records: dict[str, FileRecord]) -> str:
    waiting = sorted(name for name, r in records.items() if r.unresolved)
    if not waiting:
        return "it has no unresolved rejected files"
    return f"its unresolved rejected files: {', '.join(waiting)}"
