"""Lakehouse columns as PostgreSQL columns, and rows as COPY input.

Every type a Tributary table holds maps to one PostgreSQL type: integers by width, float and double, decimal(p, s)
as numeric(p, s) (never rounded), dates, timestamps with a time zone as timestamptz (without one as timestamp),
strings, binary as bytea, and arrays, maps and structs as jsonb.
"""

from __future__ import annotations

import io
import json
from datetime import date, datetime, time
from decimal import Decimal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


def pg_type(arrow_type: pa.DataType) -> str:
    """The PostgreSQL type of a column of `arrow_type`."""
    import pyarrow as pa

    t = pa.types
    if t.is_boolean(arrow_type):
        return "boolean"
    if t.is_int8(arrow_type) or t.is_int16(arrow_type) or t.is_uint8(arrow_type):
        return "smallint"
    if t.is_int32(arrow_type) or t.is_uint16(arrow_type):
        return "integer"
    if t.is_integer(arrow_type):
        return "bigint"
    if t.is_float16(arrow_type) or t.is_float32(arrow_type):
        return "real"
    if t.is_float64(arrow_type):
        return "double precision"
    if t.is_decimal(arrow_type):
        return f"numeric({arrow_type.precision},{arrow_type.scale})"
    if t.is_date(arrow_type):
        return "date"
    if t.is_timestamp(arrow_type):
        return "timestamp with time zone" if arrow_type.tz else "timestamp without time zone"
    if t.is_time(arrow_type):
        return "time without time zone"
    if t.is_string(arrow_type) or t.is_large_string(arrow_type) or t.is_null(arrow_type):
        return "text"
    if t.is_binary(arrow_type) or t.is_large_binary(arrow_type) or t.is_fixed_size_binary(arrow_type):
        return "bytea"
    if t.is_list(arrow_type) or t.is_large_list(arrow_type) or t.is_struct(arrow_type) or t.is_map(arrow_type):
        return "jsonb"
    raise TypeError(f"no PostgreSQL type for {arrow_type}")


def _json_value(value: object) -> object:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, list) and value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return {str(k): _json_value(v) for k, v in value}  # a map, as pyarrow hands it over
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    return value


def copy_input(table: pa.Table) -> io.BytesIO:
    """The rows of `table` as CSV for `COPY ... FROM STDIN (FORMAT csv)`: NULL unquoted, every value quoted
    (an empty string stays an empty string), nested values as JSON and binary as bytea hex."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    columns = []
    for column, field in zip(table.columns, table.schema, strict=True):
        kind = pg_type(field.type)
        if kind == "jsonb":
            values = [None if v is None else json.dumps(_json_value(v)) for v in column.to_pylist()]
            column = pa.array(values, pa.string())
        elif kind == "bytea":
            column = pa.array([None if v is None else "\\x" + v.hex() for v in column.to_pylist()], pa.string())
        elif pa.types.is_null(field.type):
            column = pa.nulls(len(table), pa.string())
        columns.append(column)
    flat = pa.table(columns, names=table.column_names)
    out = io.BytesIO()
    pacsv.write_csv(flat, out, pacsv.WriteOptions(include_header=False, quoting_style="all_valid"))
    out.seek(0)
    return out
