"""What one incremental run of one table did: the report, filled from the query's progress."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipelines.io.formats import TableStats
from pipelines.sources import file_health, streams


@dataclass
class RunReport:
    """What one incremental run of one table did."""

    table: str
    trigger: str
    batches: int = 0
    data_batches: int = 0
    rows_in: int = 0
    seconds: float = 0.0
    batch_durations_ms: list[int] = field(default_factory=list)
    metrics: dict[str, int] = field(default_factory=dict)
    watermark: str | None = None
    state_rows: int = 0
    state_memory_bytes: int = 0
    rows_dropped_by_watermark: int = 0
    # Rows left out before the watermark because their event time is implausible (see Watermark.max_future).
    rows_out_of_range: int = 0
    tables: dict[str, TableStats] = field(default_factory=dict)
    processed_rows_per_second: float = 0.0
    skipped: bool = False
    # Why a run had nothing to do, when it is worth saying (e.g. nothing has landed yet).
    note: str | None = None
    # Health of every landed file this run read (file sources; pipelines.sources.file_health.FileHealth).
    files: list[file_health.FileHealth] = field(default_factory=list)
    # Landing-folder entries the run did not read and says so on every run (subfolders).
    landing_warnings: list[str] = field(default_factory=list)
    # Per flow, when the table has several (`TableSpec.flows`): each flow's own report.
    flows: dict[str, RunReport] = field(default_factory=dict)
    # Seconds per stage of the run (`pipelines.run.runner.run_table`); empty for a flow's own report.
    stages: dict[str, float] = field(default_factory=dict)

    def file_problems(self) -> list[str]:
        """One line per rejected, empty or header-only landed file of this run, and per landing warning."""
        return [*self.landing_warnings, *(h.describe(self.table) for h in self.files if h.status != "ok")]

    def rows_written(self, table: str | None = None) -> int:
        """Rows appended (or upserted) to `table` (default: the run's main table) by this run."""
        name = table or self.table
        return self.metrics.get(f"rows_written:{name}", 0) + self.metrics.get(f"rows_upserted:{name}", 0)


def count_rows_in(report: RunReport, rows: int, data_batches: int) -> None:
    """Set the run's rows in where the stream's own count is not them: a file source's landed records
    (`pipelines.sources.file_health.record`), not the lines Spark's stream counted (header and blank lines
    included, files read by the CSV reader left out); the rows a sink counted (`pipelines.write.sinks.ROWS_IN`)."""
    report.rows_in = rows
    report.data_batches = data_batches
    busy_ms = sum(report.batch_durations_ms)
    report.processed_rows_per_second = round(rows * 1000 / busy_ms, 1) if rows and busy_ms else 0.0


def fill_from_progress(report: RunReport, progress: list[dict[str, Any]], copies: int = 1) -> None:
    """Fill `report` from the query's progress; `copies`: how often the query reads each source row (late split: 2)."""
    data_ms = 0
    for p in progress:
        report.batches += 1
        rows = int(p.get("numInputRows", 0)) // copies
        report.rows_in += rows
        report.data_batches += 1 if rows else 0
        report.batch_durations_ms.append(int(p.get("durationMs", {}).get("triggerExecution", 0)))
        data_ms += report.batch_durations_ms[-1] if rows else 0
    if data_ms:
        report.processed_rows_per_second = round(report.rows_in * 1000 / data_ms, 1)
    if progress:
        last = progress[-1]
        report.watermark = last.get("eventTime", {}).get("watermark")
        for op in last.get("stateOperators", []):
            report.state_rows += int(op.get("numRowsTotal", 0))
            report.state_memory_bytes += int(op.get("memoryUsedBytes", 0))
        for p in progress:
            for op in p.get("stateOperators", []):
                report.rows_dropped_by_watermark += int(op.get("numRowsDroppedByWatermark", 0))
            for name, observed in p.get("observedMetrics", {}).items():
                if name.startswith(streams.TIME_GUARD):
                    report.rows_out_of_range += int(observed.get(streams.OUT_OF_RANGE_METRIC) or 0)
