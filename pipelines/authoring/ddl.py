"""Schemas written as Spark DDL text, `"event_id string, amount decimal(12,2)"`, parsed without starting Spark."""

from __future__ import annotations

import re

from pyspark.sql.types import (
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from infra.errors import ConfigError
from infra.identifiers import is_column_name
from pipelines.io.landing_values import rounded

_SIMPLE: dict[str, DataType] = {
    "string": StringType(),
    "int": IntegerType(),
    "integer": IntegerType(),
    "bigint": LongType(),
    "long": LongType(),
    "smallint": ShortType(),
    "double": DoubleType(),
    "float": FloatType(),
    "boolean": BooleanType(),
    "timestamp": TimestampType(),
    "date": DateType(),
}
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")


def _type(text: str, column: str) -> DataType:
    name = text.strip().lower()
    if name in _SIMPLE:
        return _SIMPLE[name]
    decimal = _DECIMAL.match(name)
    if decimal:
        return DecimalType(int(decimal.group(1)), int(decimal.group(2)))
    raise ConfigError(
        f"schema: column {column!r} has type {text.strip()!r}; use one of {', '.join(_SIMPLE)} or decimal(p,s) "
        "(or give a pyspark StructType for nested types)"
    )


def schema(ddl: str, *, round: tuple[str, ...] = ()) -> StructType:
    """A StructType from `"name type, name type, ..."` (the simple types and `decimal(p,s)`).

    A landed decimal with more fractional digits than its scale is rescued with its text, never rounded; name the
    decimal columns whose values may be rounded to their scale in `round`.
    """
    fields = []
    for item in re.split(r",(?![^()]*\))", ddl):
        name, _, kind = item.strip().partition(" ")
        if not is_column_name(name) or not kind:
            raise ConfigError(f"schema: {item.strip()!r} is not 'column type' (e.g. 'event_id string')")
        fields.append(StructField(name, _type(kind, name)))
    return rounded(StructType(fields), *round) if round else StructType(fields)
