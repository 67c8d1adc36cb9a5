"""The incremental runner: one bounded streaming run per table, returning what it did in numbers."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from infra.errors import PipelineError, TributaryError
from infra.settings import Settings
from pipelines import streams
from pipelines.formats import TableFormat, TableStats, table_format
from pipelines.modes import check_query_mode
from pipelines.registry import FileSource, TableSpec
from pipelines.sinks import BatchContext
from pipelines.sources import find_unreadable_file, read_files, read_table


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
    tables: dict[str, TableStats] = field(default_factory=dict)
    processed_rows_per_second: float = 0.0
    skipped: bool = False

    def rows_written(self, table: str | None = None) -> int:
        """Rows appended (or upserted) to `table` (default: the run's main table) by this run."""
        name = table or self.table
        return self.metrics.get(f"rows_written:{name}", 0) + self.metrics.get(f"rows_upserted:{name}", 0)


def trigger_for(spec: TableSpec) -> tuple[str, dict[str, Any]]:
    """The trigger that makes a run bounded for this spec's source.

    File sources use availableNow: everything landed so far, split by maxFilesPerTrigger, then stop.
    Iceberg sources use Trigger.Once: Iceberg 1.10's stream does not implement availableNow, and Spark's
    wrapper for it fails for good once the stream's first snapshot is expired by maintenance. Once has the
    same bounded semantics, except that it never runs the no-data batch that emits windows closed by the
    watermark; stateful queries with a watermark in append mode are therefore drained instead (run until
    all available data, including that no-data batch, is processed, then stopped).
    """
    if isinstance(spec.source, FileSource):
        return "availableNow", {"availableNow": True}
    if spec.watermark is not None and spec.output_mode == "append":
        return "drain", {"processingTime": "0 seconds"}
    return "once", {"once": True}


def source_frame(spark: SparkSession, settings: Settings, fmt: TableFormat, spec: TableSpec) -> DataFrame:
    """The spec's streaming input after its transform."""
    if streams.needs_query_frame(spec):
        return streams.query_frame(spark, settings, fmt, spec)
    if isinstance(spec.source, FileSource):
        df = read_files(spark, settings, spec.source, spec.name)
    else:
        df = read_table(spark, fmt, spec.source)
    if spec.watermark is not None:
        df = df.withWatermark(spec.watermark.column, spec.watermark.delay)
    return spec.transform(df)


def prepare_tables(spark: SparkSession, fmt: TableFormat, spec: TableSpec) -> None:
    """Create the spec's output tables if missing."""
    for out in spec.outputs():
        fmt.ensure_table(spark, out)


def run_table(spark: SparkSession, settings: Settings, spec: TableSpec) -> RunReport:
    """Run `spec` incrementally: process everything available, commit, stop, and report."""
    fmt = table_format(settings)
    trigger_name, trigger = trigger_for(spec)
    report = RunReport(table=spec.name, trigger=trigger_name)
    started = time.perf_counter()
    checkpoint = settings.checkpoint_for(spec.name)
    metrics: Counter[str] = Counter()

    def write_batch(df: DataFrame, batch_id: int) -> None:
        ctx = BatchContext(spark, fmt, spec.name, checkpoint, batch_id, metrics)
        if spec.late_table:
            streams.write_with_late_rows(ctx, df, spec)
        else:
            spec.sink.write(ctx, df)

    try:
        if streams.nothing_to_read(spark, settings, fmt, spec):  # no batch could run: skip the query
            prepare_tables(spark, fmt, spec)
            report.skipped = True
            report.seconds = round(time.perf_counter() - started, 3)
            report.tables = {out.name: fmt.stats(spark, out.name) for out in spec.outputs()}
            return report
        stream = source_frame(spark, settings, fmt, spec)
        check_query_mode(spec, stream)  # a mode the query cannot support fails here, before anything is written
        prepare_tables(spark, fmt, spec)
        query = (
            stream.writeStream.queryName(f"tributary_{spec.name.replace('.', '_')}")
            .foreachBatch(write_batch)
            .outputMode(spec.output_mode)
            .option("checkpointLocation", str(checkpoint))
            .trigger(**trigger)
            .start()
        )
    except TributaryError:
        raise
    except Exception as exc:
        raise PipelineError(f"table {spec.name}: could not start its stream: {_first_line(exc)}") from exc
    try:
        if trigger_name == "drain":
            query.processAllAvailable()
            query.stop()
        else:
            query.awaitTermination()
    except StreamingQueryException as exc:
        if isinstance(spec.source, FileSource):
            unreadable = find_unreadable_file(settings, spec.source)
            if unreadable:
                path, reason = unreadable
                raise PipelineError(
                    f"table {spec.name}: landing file {path} cannot be read ({reason}); fix or remove it and "
                    "re-run (nothing of the failed batch was committed)"
                ) from exc
        raise PipelineError(f"table {spec.name}: run failed: {_cause(exc)}") from exc
    finally:
        if query.isActive:
            query.stop()
    _fill_from_progress(report, query.recentProgress, streams.source_copies(spec))
    report.metrics = dict(metrics)
    report.seconds = round(time.perf_counter() - started, 3)
    for out in spec.outputs():
        report.tables[out.name] = fmt.stats(spark, out.name)
    return report


def _fill_from_progress(report: RunReport, progress: list[dict[str, Any]], copies: int = 1) -> None:
    """Numbers from the query's progress; `copies`: how often the query reads each source row (late split: 2)."""
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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _cause(exc: StreamingQueryException) -> str:
    """The most specific line of a streaming failure: our own error if a sink raised one."""
    text = str(exc)
    for marker in ("PipelineError: ", "TributaryError: ", "ConfigError: "):
        if marker in text:
            return text.split(marker, 1)[1].splitlines()[0]
    caused = [line for line in text.splitlines() if line.startswith("Caused by: ")]
    if caused:
        return caused[-1].removeprefix("Caused by: ").strip()
    return _first_line(exc)
