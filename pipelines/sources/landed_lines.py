"""Landed lines = bronze rows, file by file: what a file source accounts for in the pipeline reconciliation."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq
from pyspark.sql import functions as F

from infra.files import write_atomically
from infra.paths import canonical, open_landed
from infra.settings import Settings
from pipelines.io.archive import received_files
from pipelines.io.file_source_log import committed_files
from pipelines.io.formats import table_format
from pipelines.io.landing import count_records, landing_folder
from pipelines.sources.base import Accounting, flow_checkpoint
from pipelines.sources.file_health import ACKNOWLEDGED
from pipelines.spec.sources import FileSource
from pipelines.spec.tables import MAIN_FLOW, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _lines(path: Path, source: FileSource) -> int:
    """Rows Spark reads from one landed file: non-blank lines (minus a CSV header), or Parquet rows."""
    if source.format == "parquet":
        return pq.read_metadata(path).num_rows
    with open_landed(path) as fh:
        count = count_records(fh)
    return max(count - 1, 0) if source.format == "csv" else count


def _keep(path: Path, counts: dict) -> None:
    """Keep counts for the next reconciliation; a home that cannot be written to just counts again next time."""
    with contextlib.suppress(OSError):
        write_atomically(path, json.dumps(counts))


def _counted_lines(settings: Settings, key: str, files: dict[str, Path], source: FileSource) -> dict[str, int]:
    """Each file's lines, counted once per version of the file (size, modification time, inode): the counts are
    kept under the home (`cache/landed_lines/<table>.<flow>.json`), so a reconciliation re-reads only the files
    new or changed since."""
    kept = settings.home / "cache" / "landed_lines" / f"{key}.json"
    try:
        known = json.loads(kept.read_text())
    except (OSError, ValueError):
        known = {}
    counted: dict[str, list] = {}
    for name, path in sorted(files.items()):
        stat = path.stat()
        identity = f"{stat.st_size}/{stat.st_mtime_ns}/{stat.st_ino}"
        hit = known.get(name)
        counted[name] = hit if isinstance(hit, list) and hit[:1] == [identity] else [identity, _lines(path, source)]
    if counted != known:
        _keep(kept, counted)
    return {name: int(n) for name, (_, n) in counted.items()}


def _rows_per_file(spark: SparkSession, settings: Settings, table: str) -> dict[str, int]:
    """The table's rows per `_source_file` at its current snapshot, counted in full once and then from what
    each later snapshot appended (kept under the home with the snapshot they are for); a snapshot that changed
    rows otherwise (a reprocess), or one no longer known, counts everything again."""
    fmt = table_format(settings)
    now = fmt.current_snapshot(spark, table)
    if now is None:
        return {}
    kept = settings.home / "cache" / "landed_lines" / f"{table}.rows.json"
    table_id = fmt.table_id(spark, table)
    try:
        known = json.loads(kept.read_text())
        since, counts = int(known["snapshot"]), {str(k): int(v) for k, v in known["per_file"].items()}
        if known["table_id"] != table_id:  # created again: its snapshot ids are not the kept one's
            since, counts = None, {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        since, counts = None, {}
    if since == now.snapshot_id:
        return counts
    rows = fmt.appended_rows(spark, table, since, now.snapshot_id) if since is not None else None
    if rows is None:
        rows, counts = fmt.read(spark, table, now.snapshot_id), {}
    for r in rows.groupBy("_source_file").agg(F.count(F.lit(1)).alias("n")).collect():
        if r["_source_file"] is not None:
            name = canonical(r["_source_file"])
            counts[name] = counts.get(name, 0) + int(r["n"])
    _keep(kept, {"table_id": table_id, "snapshot": now.snapshot_id, "per_file": counts})
    return counts


def _recorded_rows_per_file(spark: SparkSession, settings: Settings, spec: TableSpec) -> dict[str, int] | None:
    """The table's rows per landed file as its batches recorded them in `<table>_files` (the health of each file,
    in the batch that read it), when the table has one flow and they add up to its rows; else None.

    Both are exactly-once appends of the same batch, but in two commits: a kill between them leaves a file
    recorded whose rows are not in the table yet, which the total shows (and the rows are then counted). The
    health rows are read from Python (`TableFormat.read_rows`): a Spark job here cost most of a reconciliation."""
    fmt = table_format(settings)
    if spec.files_table is None or len(spec.all_flows()) > 1 or not fmt.exists(spark, spec.files_table):
        return None
    per_file: dict[str, int] = {}
    for r in fmt.read_rows(spec.files_table, ("file", "rows", "status")):
        if r["status"] is not None and r["status"] != ACKNOWLEDGED:
            name = canonical(str(r["file"]))
            per_file[name] = per_file.get(name, 0) + int(r["rows"] or 0)
    return per_file if sum(per_file.values()) == fmt.stats(spark, spec.name).rows else None


def landed_vs_bronze(
    spark: SparkSession, settings: Settings, bronze_spec: TableSpec, source: FileSource, flow: str = MAIN_FLOW
) -> Accounting:
    """Every file the bronze stream (its flow `flow`) read, landed or archived, has as many bronze rows as it has
    lines; notes name files not read yet and files gone from the landing folder and the archive."""
    per_file = _recorded_rows_per_file(spark, settings, bronze_spec)
    if per_file is None:
        per_file = _rows_per_file(spark, settings, bronze_spec.name)
    if len(bronze_spec.all_flows()) > 1:  # the table's other flows' rows: another folder, or a Kafka message
        folder = os.path.dirname(canonical(str(landing_folder(settings, source) / "_")))
        per_file = {name: n for name, n in per_file.items() if os.path.dirname(name) == folder}
    landed = received_files(settings, source)
    read = committed_files(flow_checkpoint(settings, bronze_spec.name, flow)) | set(per_file)
    notes = []
    pending = sorted(set(landed) - read)
    if pending:
        notes.append(f"{len(pending)} landed file(s) not yet read by {bronze_spec.name} (pending)")
    gone = sorted(read - set(landed))
    if gone:
        notes.append(f"{len(gone)} file(s) read by {bronze_spec.name} are no longer in the landing folder")
    landed_total = bronze_total = 0
    mismatched = []
    counted = _counted_lines(settings, f"{bronze_spec.name}.{flow}", {n: landed[n] for n in read & set(landed)}, source)
    for name, lines in counted.items():
        rows = per_file.get(name, 0)
        landed_total += lines
        bronze_total += rows
        if lines != rows:
            mismatched.append(f"{landed[name].name}: {lines} landed, {rows} in bronze")
    return Accounting(
        name=f"landed lines = {bronze_spec.name} rows",
        success=not mismatched,
        observed=f"{landed_total} landed lines, {bronze_total} bronze rows in {len(read & set(landed))} files",
        element_count=landed_total,
        unexpected_count=abs(landed_total - bronze_total) if mismatched else 0,
        samples=mismatched,
        notes=notes,
    )
