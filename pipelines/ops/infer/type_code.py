"""A `pyspark.sql.types` type or field as the Python code that builds it, for `tributary infer`'s output."""

from __future__ import annotations

import json

from pyspark.sql.types import (
    ArrayType,
    CharType,
    DataType,
    DayTimeIntervalType,
    DecimalType,
    MapType,
    StructField,
    StructType,
    VarcharType,
    YearMonthIntervalType,
)


def type_code(dt: DataType, used: set[str]) -> str:
    """Python code that builds `dt`; the `pyspark.sql.types` names it needs are added to `used`."""
    name = type(dt).__name__
    used.add(name)
    if isinstance(dt, StructType):
        return f"StructType([{', '.join(field_code(f, used) for f in dt.fields)}])"
    if isinstance(dt, ArrayType):
        return f"ArrayType({type_code(dt.elementType, used)}{'' if dt.containsNull else ', False'})"
    if isinstance(dt, MapType):
        key, value = type_code(dt.keyType, used), type_code(dt.valueType, used)
        return f"MapType({key}, {value}{'' if dt.valueContainsNull else ', False'})"
    if isinstance(dt, DecimalType):
        return f"DecimalType({dt.precision}, {dt.scale})"
    if isinstance(dt, CharType | VarcharType):
        return f"{name}({dt.length})"
    if isinstance(dt, DayTimeIntervalType | YearMonthIntervalType):
        return f"{name}({dt.startField}, {dt.endField})"
    return f"{name}()"


def field_code(f: StructField, used: set[str]) -> str:
    """Python code that builds the field `f`; the type names it needs are added to `used`."""
    used.add("StructField")
    nullable = "" if f.nullable else ", False"
    return f"StructField({json.dumps(f.name)}, {type_code(f.dataType, used)}{nullable})"


# The names `tb.schema` (pipelines.authoring.ddl) reads, by type.
_DDL_NAMES = {
    "StringType": "string",
    "IntegerType": "int",
    "LongType": "bigint",
    "ShortType": "smallint",
    "DoubleType": "double",
    "FloatType": "float",
    "BooleanType": "boolean",
    "TimestampType": "timestamp",
    "DateType": "date",
}


def ddl_type(dt: DataType) -> str | None:
    """`dt` as `tb.schema` text (`bigint`, `decimal(18,2)`), or None for a type it cannot express (nested ones)."""
    if isinstance(dt, DecimalType):
        return f"decimal({dt.precision},{dt.scale})"
    return _DDL_NAMES.get(type(dt).__name__)
