"""The numbers of a run, per table, and their aligned terminal summary."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pipelines.runner import RunReport

COLUMNS = (
    ("rows_in", "rows in"),
    ("rows_written", "written"),
    ("rows_quarantined", "quarant."),
    ("duplicates_dropped", "dupes"),
    ("seconds", "seconds"),
    ("table_rows", "table rows"),
)


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
        if report.watermark:
            numbers["watermark"] = report.watermark
        for key, value in sorted(report.metrics.items()):
            if key.startswith("rule_failures:") or key == "rows_with_warnings":
                numbers[key.replace(":", "_")] = value
    return numbers


def report_numbers(reports: Iterable[RunReport]) -> dict[str, dict[str, Any]]:
    """`table_numbers` for every table of every report."""
    return {name: table_numbers(r, name) for r in reports for name in r.tables}


def format_numbers(numbers: Mapping[str, Mapping[str, Any]]) -> str:
    """An aligned table: one line per table."""
    width = max([28, *(len(t) + 2 for t in numbers)])
    header = f"{'table':<{width}}" + "".join(f"{title:>11}" for _, title in COLUMNS)
    lines = [header, "-" * len(header)]
    for table, row in numbers.items():
        cells = []
        for key, _ in COLUMNS:
            value = row.get(key, "-")
            cells.append(f"{value:>11.2f}" if isinstance(value, float) else f"{value!s:>11}")
        lines.append(f"{table:<{width}}" + "".join(cells))
    return "\n".join(lines)
