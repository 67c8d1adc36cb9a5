"""Table formats: the adapter for the configured format.

Iceberg (`pipelines.io.iceberg`) is the default; Delta Lake (`pipelines.io.delta`) is written and read through
delta-rs and Spark's own Parquet reader and writer, because delta-spark's jars are not available to every install.
The operations every format provides are `pipelines.io.format_types.TableFormat`.
"""

from __future__ import annotations

from infra.errors import ConfigError
from infra.settings import Settings
from pipelines.io.delta import DeltaFormat
from pipelines.io.format_types import Merge, Staged, TableFormat, TableStats
from pipelines.io.iceberg import IcebergFormat

__all__ = ["DeltaFormat", "IcebergFormat", "Merge", "Staged", "TableFormat", "TableStats", "table_format"]


def table_format(settings: Settings) -> TableFormat:
    """The adapter for `settings.table_format`."""
    if settings.table_format == "iceberg":
        return IcebergFormat(settings)
    if settings.table_format == "delta":
        return DeltaFormat(settings)
    raise ConfigError(f"unknown table format {settings.table_format!r}")
