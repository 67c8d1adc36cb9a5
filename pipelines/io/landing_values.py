"""What makes a landed value exact: decimals parsed wide and checked against their declared scale, and the JSON
lines Spark's parser would cut short (anything after the object, a lone surrogate escape) or that hold keys
nobody declared.

`pipelines.io.landing_parse` applies these to every landed line; a value or line they reject is rescued or
corrupt, never silently changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import reduce

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DecimalType, StructField, StructType

from infra.errors import ConfigError
from infra.spark_functions import (
    CSV_RESCUED_FUNCTION,
    JSON_LINE_SHAPE_FUNCTION,
    JSON_RESCUED_FUNCTION,
    exact_decimal_function,
)

# StructField metadata of a decimal column whose landed values are rounded to its scale (`rounded`).
ROUND_METADATA = "tributary.round"


def rounded(schema: StructType, *columns: str) -> StructType:
    """`schema` with the decimal `columns` marked as rounded to their scale on landing (HALF_UP, as Spark casts);
    every other decimal keeps the default: a value with more digits than its scale is rescued, never rounded."""
    decimals = {f.name for f in schema.fields if isinstance(f.dataType, DecimalType)}
    unknown = [c for c in columns if c not in decimals]
    if unknown:
        raise ConfigError(
            f"schema: round={unknown!r} names no decimal column; "
            f"decimal columns: {', '.join(sorted(decimals)) or 'none'}"
        )
    return StructType(
        [
            StructField(f.name, f.dataType, f.nullable, {**f.metadata, ROUND_METADATA: True})
            if f.name in columns
            else f
            for f in schema.fields
        ]
    )


def named_column(name: str) -> Column:
    """A column by its exact name (dots, spaces and backticks included)."""
    return F.col("`" + name.replace("`", "``") + "`")


def wide_type(f: StructField) -> DataType:
    """The type a landed value is parsed as: a decimal at the widest scale its integer digits allow (so a value
    with more fractional digits than the declared scale is seen, not rounded), unless the column is `rounded`."""
    t = f.dataType
    if isinstance(t, DecimalType) and not f.metadata.get(ROUND_METADATA):
        return DecimalType(38, 38 - (t.precision - t.scale))
    return t


def wide(schema: StructType) -> StructType:
    """`schema` with every decimal at its parse type (`wide_type`)."""
    return StructType([StructField(f.name, wide_type(f), f.nullable, f.metadata) for f in schema.fields])


def exact_scales(schema: StructType) -> dict[str, int]:
    """The scale of each top-level decimal whose landed values must be exact (not `rounded`), by name."""
    return {
        f.name: f.dataType.scale
        for f in schema.fields
        if isinstance(f.dataType, DecimalType) and wide_type(f) != f.dataType
    }


def exact_values(
    session: SparkSession, schema: StructType, parsed: Callable[[str], Column]
) -> tuple[dict[str, Column], Column, dict[str, Column]]:
    """Each field's value from its wide parse (`parsed(name)`, see `wide_type`), NULL for a decimal that does
    not fit its declared type exactly; a column TRUE when some decimal did not; and those decimals' exact text.
    `session` is the one the columns are used in (the decimal test is a function registered there).

    A decimal parse is exact up to 38 digits: digits beyond them are compared as zeros. The column TRUE for an
    inexact decimal tests the value first, so Spark computes each value once where both are used.
    """
    values: dict[str, Column] = {}
    inexact: list[Column] = []
    texts: dict[str, Column] = {}
    for f in schema.fields:
        wide = parsed(f.name)
        if wide_type(f) == f.dataType:
            values[f.name] = wide
            continue
        value = F.call_function(exact_decimal_function(session, f.dataType), wide, F.lit(f.dataType.scale))
        values[f.name] = value
        inexact.append(value.isNull() & wide.isNotNull())
        texts[f.name] = decimal_text(wide)
    return values, reduce(lambda a, b: a | b, inexact, F.lit(False)), texts


def decimal_text(wide: Column) -> Column:
    """A wide decimal's exact text, without the zeros its scale padded it with: "10.5550000" -> "10.555"."""
    return F.regexp_replace(F.regexp_replace(wide.cast("string"), r"(\.[0-9]*?)0+$", "$1"), r"\.$", "")


def missing_flags(values: Sequence[Column]) -> Column:
    """One character per column: `1` when its value is NULL, else `0` (how the rescue functions are told)."""
    return F.concat(F.lit(""), *[F.when(v.isNull(), F.lit("1")).otherwise(F.lit("0")) for v in values])


# `json_line_shape` values, as `tributary.landing.JsonLineShape` (infra/jvm) returns them.
NOT_ONE_OBJECT, DECLARED_KEYS, UNDECLARED_KEY = 0, 1, 2


def json_line_shape(line: Column, names: Sequence[str]) -> Column:
    """`NOT_ONE_OBJECT` unless `line` is exactly one JSON object (Spark's parsers stop after the first value and
    would drop the rest), else `DECLARED_KEYS` when every top-level key is in `names`, else `UNDECLARED_KEY`.

    One tokenizing pass in the JVM (infra/jvm `JsonLineShape`, registered in every session by `infra.spark`),
    with the parser features of Spark's `json_object_keys`; values are skipped, never built. Listing the keys,
    testing them and proving nothing follows the object with Spark's own functions took three passes.
    """
    return F.call_function(JSON_LINE_SHAPE_FUNCTION, line, F.lit(json.dumps(list(names))))


def json_rescued(line: Column, names: Sequence[str], values: dict[str, Column], exact: dict[str, Column]) -> Column:
    """`_rescued_data` of a JSON `line`: an object of the declared fields whose typed value (`values`) is NULL, with
    their text (their `exact` text where given, else the line's), and of every undeclared key; NULL when empty.

    One function in the JVM (infra/jvm `JsonRescued`, registered by `infra.spark_functions`) that evaluates Spark's own
    `from_json(line, 'map<string,string>')` and writes the object as `to_json` does: the same result as those
    functions, but compiled with the rest of the query (they would keep their whole projection interpreted).
    """
    missing = missing_flags([values[n] for n in names])
    texts = F.array(*[exact[n] if n in exact else F.lit(None).cast("string") for n in names])
    return F.call_function(JSON_RESCUED_FUNCTION, line, F.lit(json.dumps(list(names))), missing, texts)


def csv_rescued(
    line: Column, names: Sequence[str], values: dict[str, Column], extra: Sequence[Column], options: dict[str, str]
) -> Column:
    """`_rescued_data` of a record Spark's CSV reader read from a file whose header is `names`: an object of the
    declared columns (`values`, schema order) whose value is NULL, with their text in the record's `line` (NULL
    for a record that was not malformed: none), then of the undeclared columns with the reader's values (`extra`,
    file order); NULL when empty.

    One function in the JVM (infra/jvm `CsvRescued`) that evaluates Spark's own `from_csv(line, <all strings>,
    options)` and writes the object as `to_json` writes a map: what those functions give, compiled with the rest
    of the query (they would keep their whole projection interpreted).
    """
    layout = json.dumps({"names": list(names), "declared": list(values), "options": options})
    missing = missing_flags(list(values.values()))
    extras = F.array(*extra) if extra else F.array().cast("array<string>")
    return F.call_function(CSV_RESCUED_FUNCTION, line, F.lit(layout), missing, extras)


# A `\uD800`-`\uDBFF` escape not followed by a `\uDC00`-`\uDFFF` one, or the latter not preceded by the former;
# an escape is a backslash preceded by an even number of backslashes.
_ESCAPE = r"(?<!\\)(?:\\\\)*\\u"
_LONE_SURROGATE = (
    rf"{_ESCAPE}[dD][89abAB][0-9a-fA-F]{{2}}(?!\\u[dD][c-fC-F][0-9a-fA-F]{{2}})"
    rf"|(?<!\\u[dD][89abAB][0-9a-fA-F]{{2}}){_ESCAPE}[dD][c-fC-F][0-9a-fA-F]{{2}}"
)


def lone_surrogate(line: Column) -> Column:
    """TRUE when a JSON line escapes half of a UTF-16 surrogate pair (`"\\ud800"`): no UTF-8 text can hold it, and
    Spark would store `?` in its place. Only lines with a `\\u` escape are searched."""
    return line.contains("\\u") & line.rlike(_LONE_SURROGATE)
