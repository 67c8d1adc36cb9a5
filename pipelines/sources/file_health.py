"""Per-file health of landed data: every landed file is counted, named, and rejected whole when mostly corrupt.

Each micro-batch of a file source is checked before anything of it is written, with one aggregation over the
batch (grouped by file): rows read, corrupt rows, rows with rescued data, and fields the schema does not
declare. Files of the batch that yielded no rows are named as empty or header-only. A file with at least
`FileSource.reject_file_ratio` corrupt rows, or a CSV file whose header lacks a declared column, is rejected:
its rows are stamped with the reason in `_file_rejected` (bronze keeps every landed line; silver quarantines
them as `file_rejected`), and a table that reads the files directly does not receive them. One row per file
goes to the spec's `<table>_files` table in the same batch, so the health of every file is recorded exactly
once, and a blocking asset check fails while a rejected file is not acknowledged (`tributary files ack`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from infra.errors import PipelineError
from infra.identifiers import is_column_name
from infra.paths import local_path
from pipelines.io.file_source_log import seen_files
from pipelines.io.json_reader import ProofAhead
from pipelines.io.landing_parse import (
    REJECTED_COLUMN,
    RESCUED_COLUMN,
    CsvHeaders,
    file_name,
    rescued_value,
    without_rescued,
)
from pipelines.io.sources import parse_batch, read_batch_by_reader
from pipelines.sources.file_stats import FileStats, file_stats, observed_figures, observed_files, read_observed
from pipelines.spec.sources import FileSource
from pipelines.spec.tables import TableSpec
from pipelines.write.observed import observed
from pipelines.write.sinks import AppendSink, BatchContext

ACKNOWLEDGED = "acknowledged"
PROBLEM_STATUSES = ("rejected", "empty", "header_only")


class LandedDuringStart(PipelineError):
    """A CSV file landed after the run read the headers; the query is restarted to read its header too."""


@dataclass
class FileHealth:
    """What one landed file held, and whether it was accepted."""

    file: str
    status: str  # ok | rejected | empty | header_only
    rows: int = 0
    corrupt_rows: int = 0
    rescued_rows: int = 0
    reason: str | None = None
    new_fields: list[str] = field(default_factory=list)
    # Rows Spark's CSV reader could not give their line (`pipelines.io.csv_reader.REPARSE_MARK`): parse again.
    reparse_rows: int = 0

    def row(self, recorded_at: datetime, batch_id: int | None) -> dict[str, object]:
        """This file's row of the `<table>_files` table (`files_output`)."""
        return {
            "file": self.file,
            "status": self.status,
            "reason": self.reason,
            "rows": self.rows,
            "corrupt_rows": self.corrupt_rows,
            "rescued_rows": self.rescued_rows,
            "new_fields": self.new_fields,
            "recorded_at": recorded_at,
            "_batch_id": batch_id,
        }

    def describe(self, table: str) -> str:
        """One line naming the file, what is wrong with it and what to do."""
        if self.status == "rejected":
            return (
                f"{table}: landing file {self.file} was rejected: {self.reason}; land a fixed copy under a new name, "
                f"then acknowledge it with 'tributary files ack {table} {Path(self.file).name}'"
            )
        what = "is empty" if self.status == "empty" else "has a header but no rows"
        return f"{table}: landing file {self.file} {what} (nothing to load from it)"


def batch_files(ctx: BatchContext) -> list[str]:
    """The canonical paths of the files Spark planned into this micro-batch (from the checkpoint's source log)."""
    return sorted(e.path for e in seen_files(ctx.checkpoint).values() if e.batch_id == ctx.batch_id)


def check_layouts(ctx: BatchContext, headers: CsvHeaders) -> None:
    """Refuse a batch holding a CSV file whose header the run has not read (it landed while the run started)."""
    for path in batch_files(ctx):
        name = Path(path).name
        if name not in headers.by_file and name not in headers.problems and Path(path).stat().st_size > 0:
            raise LandedDuringStart(f"table {ctx.table}: landing file {path} landed while the run was starting")


def assess(ctx: BatchContext, stats: list[FileStats], spec: TableSpec, headers: CsvHeaders | None) -> list[FileHealth]:
    """The health of every file of the batch from its figures (`file_stats`)."""
    source = spec.source
    assert isinstance(source, FileSource)
    problems = headers.problems if headers else {}
    found: dict[str, FileHealth] = {}
    for item in stats:
        path = str(local_path(item.file) or item.file)
        health = FileHealth(path, "ok", item.rows, item.corrupt, item.rescued, None, item.new_fields)
        health.reparse_rows = item.reparse
        problem = problems.get(Path(path).name)
        ratio = health.corrupt_rows / health.rows
        if problem:
            health.status, health.reason = "rejected", problem
        elif ratio >= source.reject_file_ratio:
            health.status = "rejected"
            health.reason = (
                f"{health.corrupt_rows} of {health.rows} rows are corrupt ({ratio:.0%}; reject_file_ratio "
                f"{source.reject_file_ratio:g})"
            )
        found[Path(path).name] = health
    out = list(found.values())
    for path in batch_files(ctx):
        if Path(path).name not in found:
            header_only = headers is not None and Path(path).name in headers.by_file
            out.append(FileHealth(path, "header_only" if header_only else "empty"))
    return sorted(out, key=lambda h: h.file)


def check_evolution(ctx: BatchContext, spec: TableSpec, health: list[FileHealth]) -> None:
    """In `fail` mode, stop before writing when a file holds a field the schema does not declare."""
    source = spec.source
    assert isinstance(source, FileSource)
    if source.schema_evolution != "fail":
        return
    for item in health:
        if item.new_fields and item.status != "rejected":
            raise PipelineError(
                f"table {ctx.table}: landing file {item.file} has field(s) {', '.join(item.new_fields)} that the "
                "schema does not declare (schema_evolution='fail'); declare them in the FileSource schema, or use "
                f"schema_evolution='rescue' or 'add_new_columns' (nothing of batch {ctx.batch_id} was written)"
            )


def add_new_columns(ctx: BatchContext, spec: TableSpec, rows: DataFrame, health: list[FileHealth]) -> DataFrame:
    """`add_new_columns`: add new fields as nullable string columns of the table, fill them, trim the rescue."""
    source = spec.source
    assert isinstance(source, FileSource)
    if source.schema_evolution != "add_new_columns":
        return rows
    new = sorted({f for h in health if h.status != "rejected" for f in h.new_fields if is_column_name(f)})
    have = set(ctx.fmt.columns(ctx.spark, ctx.table))
    missing = [f for f in new if f not in have]
    if missing:
        ctx.fmt.add_string_columns(ctx.spark, ctx.table, missing)
        have.update(missing)
    added = sorted(have - set(rows.columns) - set(spec.output.schema.names))
    if not added:
        return rows
    filled = rows.select("*", *[rescued_value(name).alias(name) for name in added])
    return filled.withColumn(RESCUED_COLUMN, without_rescued(added))


def stamp(rows: DataFrame, health: list[FileHealth]) -> DataFrame:
    """Add `_file_rejected`: the reason for rows of a rejected file, NULL otherwise."""
    rejected = {Path(h.file).name: h.reason for h in health if h.status == "rejected"}
    if not rejected:
        return rows.withColumn(REJECTED_COLUMN, F.lit(None).cast("string"))
    reasons: Column = F.create_map(*[F.lit(x) for item in rejected.items() for x in item])
    return rows.withColumn(REJECTED_COLUMN, reasons[file_name(F.col("_source_file"))])


# Metrics of every batch written (replays included): the run's rows in are its landed records, counted per file
# (header lines and blank lines are not records; Spark's own input count does not see files read by the CSV reader).
LANDED_ROWS, LANDED_BATCHES = "landed_rows", "landed_batches"


def record(ctx: BatchContext, spec: TableSpec, health: list[FileHealth]) -> None:
    """Append the batch's file health to `<table>_files` (once per batch, like every append) and count it."""
    rows = sum(h.rows for h in health)
    ctx.metrics[LANDED_ROWS] += rows
    ctx.metrics[LANDED_BATCHES] += 1 if rows else 0
    if not health or spec.files_table is None:
        return
    replayed = ctx.already_committed(spec.files_table)
    now = datetime.now(UTC)
    ctx.append_rows([h.row(now, ctx.batch_id) for h in health], spec.files_table)
    if replayed:
        return  # counted by the batch's first attempt
    ctx.files.extend(health)
    ctx.metrics["files_read"] += len(health)
    ctx.metrics["rows_rescued"] += sum(h.rescued_rows for h in health)
    ctx.metrics["rows_corrupt"] += sum(h.corrupt_rows for h in health)
    for status in PROBLEM_STATUSES:
        ctx.metrics[f"files_{status}"] += sum(1 for h in health if h.status == status)


def write_landed(
    ctx: BatchContext, df: DataFrame, spec: TableSpec, headers: CsvHeaders | None, ahead: ProofAhead | None = None
) -> None:
    """Check one micro-batch of landed files (`df`, as `read_files` reads them) file by file, record their health,
    then write its rows through the sink.

    Nothing is written when the batch fails a check. Bronze keeps the rows of a rejected file (stamped); a
    table that reads landed files directly does not receive them. CSV and JSON files that Spark's own reader
    reads exactly as the line parse does are read by it (`pipelines.io.csv_reader`, `pipelines.io.json_reader`);
    when a row needs its line back, the batch is parsed line by line instead, before anything is written.
    """
    if headers is not None:
        check_layouts(ctx, headers)
    source = spec.source
    assert isinstance(source, FileSource)
    at = datetime.now(UTC)
    lines = functools.cache(lambda: parse_batch(df, source, headers, at))
    with ctx.clock.stage("batch.reader_plan"):
        by_reader = read_batch_by_reader(ctx.spark, source, headers, batch_files(ctx), lines, at, ahead)
    if by_reader is not None:
        if _write_checked(ctx, by_reader.frame, spec, headers, by_reader.records):
            ctx.metrics[f"files_read_by_{source.format}_reader"] += by_reader.files
            return
        ctx.metrics["batches_parsed_again"] += 1
    _write_checked(ctx, lines(), spec, headers, None)


def _write_checked(
    ctx: BatchContext, df: DataFrame, spec: TableSpec, headers: CsvHeaders | None, records: dict[str, int] | None
) -> bool:
    """`write_landed` for one way of reading the batch (with its files' `records` where counted); False (nothing
    written) when a row must be parsed again."""
    staged = write_staged(ctx, df, spec, headers, records)
    if staged is not None:
        return staged
    batch = df.persist()
    try:
        with ctx.clock.stage("batch.file_health"):
            health = assess(ctx, file_stats(batch, spec.source), spec, headers)
        if any(h.reparse_rows for h in health):
            return False
        check_evolution(ctx, spec, health)
        rows = stamp(batch.drop("_layout"), health)
        if spec.layer != "bronze":
            rows = rows.filter(F.col(REJECTED_COLUMN).isNull())
        rows = add_new_columns(ctx, spec, rows, health)
        with ctx.clock.stage("batch.files_table"):
            record(ctx, spec, health)
        spec.sink.write(ctx, spec.transform(rows))
        return True
    finally:
        batch.unpersist()


def write_staged(
    ctx: BatchContext,
    df: DataFrame,
    spec: TableSpec,
    headers: CsvHeaders | None,
    records: dict[str, int] | None = None,
) -> bool | None:
    """Write-audit-publish for a bronze table that keeps landed rows as read: the batch is parsed and written once,
    off the main branch; its file health is read back from the written rows (a few columns of Parquet), and the
    write is published only when every file is accepted. Otherwise the staged
    write is left unpublished (nobody reads it; snapshot expiry removes it) and None sends the batch through
    the checked path, which stamps rejected files. Returns True when the batch was written here, False when a
    row must be parsed again (nothing published), None when the checked path is to write it.

    This replaces caching the parsed batch for the health aggregation and then writing it from the cache, for
    batches of at least `TRIBUTARY_STAGE_LANDING_MB`.
    """
    source = spec.source
    assert isinstance(source, FileSource)
    if spec.layer != "bronze" or not isinstance(spec.sink, AppendSink) or source.schema_evolution == "add_new_columns":
        return None  # (columns added by evolution are filled from the rescued data by the checked path)
    if ctx.already_committed(ctx.table):
        return None  # a replayed batch goes the checked path, which skips what it already committed
    files = batch_files(ctx)
    if sum(Path(f).stat().st_size for f in files if Path(f).exists()) < ctx.stage_bytes:
        return None  # caching a small batch costs less than staging's extra commit and read-back
    if headers is not None and any(Path(f).name in headers.problems for f in files):
        return None
    rows = stamp(df.drop("_layout"), [])
    if spec.transform(rows) is not rows:
        return None  # an author's function may drop or change lineage columns: health is taken before it
    # The figures are observed while the batch is written (read back from the staged rows when they cannot be).
    observation = Observation()
    observable = observed_files(df.sparkSession, files, records)
    figures = observed_figures(source, observable)
    out = spec.sink.rows(ctx, rows)
    staged = ctx.stage(out.observe(observation, *figures) if figures else out, ctx.table)
    with ctx.clock.stage("batch.file_health"):
        stats = read_observed(observable, observed(observation)) if observable else None
        if stats is None:
            ctx.metrics["file_health_read_back"] += 1
            stats = file_stats(ctx.fmt.read_staged(df.sparkSession, ctx.table, staged), source)
        health = assess(ctx, stats, spec, headers)
    if any(h.reparse_rows for h in health):
        return False
    check_evolution(ctx, spec, health)
    if any(h.status == "rejected" for h in health):
        ctx.metrics["staged_batches_checked_again"] += 1
        return None
    with ctx.clock.stage("batch.files_table"):
        record(ctx, spec, health)
    ctx.publish(df.sparkSession, staged, ctx.table)
    return True
