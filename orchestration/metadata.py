"""Our numbers and reports as Dagster metadata: numbers become plottable values, anything else text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from dagster import MetadataValue

from pipelines.run.summary import FILE_PROBLEMS_KEY, table_notes, table_numbers

if TYPE_CHECKING:
    from pipelines.sources.report import RunReport
    from pipelines.write.ranges import RangeReport


def as_metadata(values: Mapping[str, object]) -> dict[str, MetadataValue]:
    """Values as Dagster metadata: ints and floats are plotted by the UI, MetadataValues are kept, the rest is text."""
    meta: dict[str, MetadataValue] = {}
    for key, value in values.items():
        if isinstance(value, MetadataValue):
            meta[key] = value
        elif isinstance(value, bool) or not isinstance(value, int | float):
            meta[key] = MetadataValue.text(str(value))
        elif isinstance(value, int):
            meta[key] = MetadataValue.int(value)
        else:
            meta[key] = MetadataValue.float(value)
    return meta


def report_metadata(report: RunReport, table: str) -> dict[str, MetadataValue]:
    """The run's numbers for one table as Dagster metadata, with its note and problem landed files (Markdown)."""
    meta = as_metadata(table_numbers(report, table))
    for key, text in table_notes(report, table).items():
        meta[key] = MetadataValue.md(text) if key == FILE_PROBLEMS_KEY else MetadataValue.text(text)
    return meta


def range_metadata(report: RangeReport) -> dict[str, MetadataValue]:
    """A backfill's or reprocess's numbers as Dagster metadata."""
    return as_metadata(report.numbers())
