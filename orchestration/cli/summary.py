"""The terminal summary of runs: an aligned table of their numbers, then their notes and problem landed files."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pipelines.run.summary import FILE_PROBLEMS_KEY, FLOW_PREFIX, NOTE_KEY

if TYPE_CHECKING:
    from pipelines.sources.report import RunReport

COLUMNS = (
    ("rows_in", "rows in"),
    ("rows_written", "written"),
    ("rows_quarantined", "quarant."),
    ("duplicates_dropped", "dupes"),
    ("seconds", "seconds"),
    ("table_rows", "table rows"),
)


def report_lines(reports: Iterable[RunReport]) -> list[str]:
    """The notes and problem landed files of the runs, one line each (for the terminal, after the numbers)."""
    lines = []
    for report in reports:
        if report.note:
            lines.append(f"{report.table}: {report.note}")
        lines.extend(report.file_problems())
    return lines


def numbers_lines(numbers: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """`report_lines` recovered from recorded metadata (`table_notes` keys), e.g. of a Dagster run."""
    lines = []
    for table, row in numbers.items():
        if row.get(NOTE_KEY):
            lines.append(f"{table}: {row[NOTE_KEY]}")
        items = str(row.get(FILE_PROBLEMS_KEY) or "").splitlines()
        lines.extend(item.removeprefix("- ") for item in items if item.strip())
    return lines


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
        for flow in _flows(row):
            values = {key: row.get(f"{FLOW_PREFIX}{flow}_{key}", "") for key, _ in COLUMNS}
            cells = [f"{value:>11.2f}" if isinstance(value, float) else f"{value!s:>11}" for value in values.values()]
            lines.append(f"{'  flow ' + flow:<{width}}" + "".join(cells))
    return "\n".join(lines)


def _flows(row: Mapping[str, Any]) -> list[str]:
    """The flows of a table fed by several, in their order, from its `flow_<name>_rows_in` numbers."""
    suffix = "_rows_in"
    return [key[len(FLOW_PREFIX) : -len(suffix)] for key in row if key.startswith(FLOW_PREFIX) and key.endswith(suffix)]
