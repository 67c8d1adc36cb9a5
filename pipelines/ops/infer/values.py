"""What the sampled values say beyond Spark's inferred types: JSON key order, dates, exact decimals, nulls.

Also how a CSV line splits into cells and a header into column names, as Tributary's reader takes them.
"""

from __future__ import annotations

import csv
import json
import re
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    StructField,
    StructType,
    TimestampType,
)

from pipelines.ops.infer.type_code import type_code

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_INTEGER = re.compile(r"^[+-]?\d+$")
_PLAIN_DECIMAL = re.compile(r"^[+-]?(\d+)\.(\d+)$")
_MONEY_MAX_SCALE = 4
_MAX_PRECISION = 38  # Spark's DecimalType limit


class _JsonNumber(str):
    """The text of a JSON number with a fraction or exponent, kept as written (for the exact decimal)."""


def parse_json_line(line: bytes) -> Any:
    """The JSON value of a sampled line, fractions and exponents kept as written; None when it is not JSON."""
    try:
        return json.loads(line.decode("utf-8"), parse_float=_JsonNumber)
    except (UnicodeDecodeError, ValueError):
        return None


def record_order(value: Any, order: dict[str, Any]) -> None:
    """Add the object keys of `value` to `order` (key → nested order) in the order they are first seen."""
    if isinstance(value, dict):
        for key, item in value.items():
            record_order(item, order.setdefault(key, {}))
    elif isinstance(value, list):
        for item in value:  # the elements of an array share one struct type
            record_order(item, order)


def reorder(dt: DataType, order: dict[str, Any]) -> DataType:
    """`dt` with struct fields in first-seen order (fields never seen keep Spark's order, at the end)."""
    if isinstance(dt, StructType):
        by_name = {f.name: f for f in dt.fields}
        names = [n for n in order if n in by_name] + [n for n in by_name if n not in order]
        return StructType(
            [
                StructField(n, reorder(by_name[n].dataType, order.get(n, {})), by_name[n].nullable, by_name[n].metadata)
                for n in names
            ]
        )
    if isinstance(dt, ArrayType):
        return ArrayType(reorder(dt.elementType, order), dt.containsNull)
    return dt


def csv_cells(line: bytes) -> list[str]:
    """The cells of a CSV line, a backslash being the escape character (Spark's CSV default)."""
    return next(csv.reader([line.decode("utf-8", errors="replace")], escapechar="\\"), [])


def header_names(header: bytes) -> list[str]:
    """Column names of a header line, as the reader takes them (trimmed; an empty name is `_c<position>`)."""
    return [cell.strip() or f"_c{i}" for i, cell in enumerate(csv_cells(header))]


def refine_field(f: StructField, values: list[Any] | None, notes: dict[str, str]) -> StructField:
    """Apply the date rule and note the decimal hint and null-only columns for a top-level field."""
    present = [v for v in values or [] if v is not None]
    if values and not present:
        notes[f.name] = f"only nulls in the sample: {type_code(f.dataType, set())} is a guess"
        return f
    if (
        isinstance(f.dataType, TimestampType)
        and present
        and all(isinstance(v, str) and _DATE.match(v) for v in present)
    ):
        return StructField(f.name, DateType(), f.nullable, f.metadata)
    if isinstance(f.dataType, DoubleType) and present:
        exact = _exact_decimal(present)
        if exact is not None:
            notes[f.name] = (
                f"every sampled value has at most {exact.scale} decimal places: double if approximate will do"
            )
            return StructField(f.name, exact, f.nullable, f.metadata)
    return f


def _exact_decimal(values: list[Any]) -> DecimalType | None:
    """The exact type of values that are all plain decimals with at most 4 places (amounts, prices, rates): at
    least 18 digits, so later, larger values fit; None when any value is not one (an exponent, more places)."""
    scale = digits = 0
    for value in values:
        if isinstance(value, bool):
            return None
        if isinstance(value, int) or (isinstance(value, str) and _INTEGER.match(value.strip())):
            digits = max(digits, len(str(value).strip().lstrip("+-").lstrip("0")) or 1)
            continue
        match = _PLAIN_DECIMAL.match(str(value).strip()) if isinstance(value, str) else None
        if match is None:
            return None
        digits = max(digits, len(match[1].lstrip("0")) or 1)
        scale = max(scale, len(match[2]))
    if not 1 <= scale <= _MONEY_MAX_SCALE or digits + scale > _MAX_PRECISION:
        return None
    return DecimalType(max(18, digits + scale), scale)
