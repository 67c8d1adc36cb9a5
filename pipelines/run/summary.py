"""The numbers and notes of a run, per table; their keys double as Dagster metadata names."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pipelines.sources.report import RunReport
from pipelines.spec.tables import FILES_SUFFIX

# Per-file health counts of a file-source run (written by pipelines.sources.file_health.record), as metadata names.
FILE_COUNTS = ("files_read", "files_rejected", "files_empty", "files_header_only", "rows_rescued", "rows_corrupt")
# Metadata names of a run's words (as opposed to its numbers): why it had nothing to do, and its problem files.
NOTE_KEY = "run_note"
FILE_PROBLEMS_KEY = "landed_file_problems"


def table_numbers(report: RunReport, table: str) -> dict[str, Any]:
    """What a run did to one of its tables; the keys double as Dagster metadata names."""
    stats = report.tables[table]
    numbers: dict[str, Any] = {
        "rows_written": report.rows_written(table),
        "table_rows": stats.rows,
        "data_files": stats.data_files,
        "table_bytes": stats.bytes,
        "snapshot_id": str(stats.snapshot_id),
    }
    if table == report.table:
        numbers.update(
            rows_in=report.rows_in,
            batches=report.batches,
            seconds=report.seconds,
            trigger=report.trigger,
            rows_quarantined=report.metrics.get("rows_quarantined", 0),
            duplicates_dropped=report.metrics.get("duplicates_dropped", 0),
            state_rows=report.state_rows,
            rows_dropped_by_watermark=report.rows_dropped_by_watermark,
            rows_out_of_range=report.rows_out_of_range,
            state_memory_bytes=report.state_memory_bytes,
            processed_rows_per_second=report.processed_rows_per_second,
            batch_ms_max=max(report.batch_durations_ms, default=0),
            batch_ms_total=sum(report.batch_durations_ms),
            rows_late=report.metrics.get("rows_late", 0),
        )
        # Where the run's time went, one plottable number per stage (e.g. seconds_plan, seconds_batch_append).
        numbers.update({f"seconds_{stage.replace('.', '_')}": value for stage, value in report.stages.items()})
        if report.watermark:
            numbers["watermark"] = report.watermark
        if f"{report.table}{FILES_SUFFIX}" in report.tables:  # a file-source run: always present, so Dagster plots 0s
            numbers.update({key: report.metrics.get(key, 0) for key in FILE_COUNTS})
        numbers.update(flow_numbers(report))
        for key, value in sorted(report.metrics.items()):
            if key.startswith("rule_failures:") or key == "rows_with_warnings":
                numbers[key.replace(":", "_")] = value
            elif key.startswith("kafka_"):  # a Kafka-fed run: lag, offsets read and lost, partitions
                numbers[key] = value
    return numbers


# Per-flow numbers of a table fed by several flows: `flow_<name>_<number>`.
FLOW_PREFIX = "flow_"
FLOW_NUMBERS = ("rows_in", "batches", "seconds")


def flow_numbers(report: RunReport) -> dict[str, Any]:
    """Each flow's rows in, batches, seconds, files read and Kafka offsets read, for a table fed by several flows
    (`flow_<name>_rows_in`, ...); nothing for a table of one flow."""
    numbers: dict[str, Any] = {}
    for name, flow in report.flows.items():
        numbers.update({f"{FLOW_PREFIX}{name}_{key}": getattr(flow, key) for key in FLOW_NUMBERS})
        numbers[f"{FLOW_PREFIX}{name}_skipped"] = flow.skipped
        for key in ("files_read", "kafka_offsets_read"):
            if key in flow.metrics:
                numbers[f"{FLOW_PREFIX}{name}_{key}"] = flow.metrics[key]
    return numbers


def table_notes(report: RunReport, table: str) -> dict[str, str]:
    """What a run has to say about its main table: its note, and one Markdown item per problem landed file."""
    if table != report.table:
        return {}
    notes: dict[str, str] = {}
    if report.note:
        notes[NOTE_KEY] = report.note
    problems = report.file_problems()
    if problems:
        notes[FILE_PROBLEMS_KEY] = "\n".join(f"- {line}" for line in problems)
    return notes


def report_numbers(reports: Iterable[RunReport]) -> dict[str, dict[str, Any]]:
    """`table_numbers` for every table of every report."""
    return {name: table_numbers(r, name) for r in reports for name in r.tables}
