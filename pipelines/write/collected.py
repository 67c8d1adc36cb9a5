"""A few rows of a frame brought to the driver as values pyarrow writes exactly (`TableFormat.append_rows`).

Spark hands a TIMESTAMP to Python as a naive datetime in the Python process's local time zone, which pyarrow
would then store as if it were UTC: outside a UTC process every instant would move. Timestamps therefore travel
as microseconds since the epoch and become UTC-aware datetimes here. Only flat rows are collected (atomic values
and arrays of them, never of timestamps): anything nested keeps the Spark write.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, AtomicType, DataType, StructType, TimestampType

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _flat(data_type: DataType) -> bool:
    if isinstance(data_type, ArrayType):
        return isinstance(data_type.elementType, AtomicType) and not isinstance(data_type.elementType, TimestampType)
    return isinstance(data_type, AtomicType)


def collectable(schema: StructType) -> bool:
    """Whether rows of `schema` can be collected exactly: every column an atomic value or an array of them."""
    return all(_flat(f.dataType) for f in schema.fields)


def collect_exact(df: DataFrame) -> list[dict[str, object]]:
    """The rows of `df` (a `collectable` schema) as dicts, timestamps as UTC-aware datetimes."""
    instants = {f.name for f in df.schema.fields if isinstance(f.dataType, TimestampType)}
    columns = [F.unix_micros(F.col(c)).alias(c) if c in instants else F.col(c) for c in df.columns]
    rows = [r.asDict() for r in df.select(*columns).collect()]
    for row in rows:
        for c in instants:
            if row[c] is not None:
                row[c] = _EPOCH + timedelta(microseconds=row[c])
    return rows
