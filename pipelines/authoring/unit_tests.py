"""Unit tests of one table's function: rows given for its inputs, the rows it must return (`tributary test`).

`tb.test("silver.events", given={"bronze.events": [...]}, expect=[...])`, written beside the tables (any module
of a dataset package), runs the table's declared function on the given rows as one batch plan, and checks what it
returns; with `quarantined=[...]` also the rows the table's row rules reject, each with its `reasons` (the names of
the rules it failed). Rows are dicts by column: a given row names only the columns the test needs (the others are
NULL), an expected row only the columns to compare (rows are compared as a bag, in any order). Values are what
JSON holds (`"2026-11-02 10:00:00"` for a timestamp, `"12.50"` or `Decimal` for a decimal, Python dates and
datetimes as well), typed by the input's or the output's schema. What the write kind does after the function
(deduplication, merges, windows' emission, late rows) is not part of a unit test: the end-to-end tests cover it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, StructType

from infra.errors import ConfigError, first_line
from pipelines.authoring.declarations import DECLARED, Declaration, DeclarationError, caller_module, place
from pipelines.authoring.schemas import landed_schema
from pipelines.spec.registry import Registry
from pipelines.spec.rules import REASONS_COLUMN, WARNINGS_COLUMN, apply_rules, passes_rules

Rows = tuple[Mapping[str, Any], ...]
# The column of an expected quarantined row that lists the rules it failed.
REASONS = "reasons"


@dataclass(frozen=True)
class UnitTest:
    """One declared test (`test`)."""

    table: str
    given: tuple[tuple[str, Rows], ...]
    expect: Rows
    quarantined: Rows | None
    name: str
    where: str
    module: str


UNIT_TESTS: list[UnitTest] = []


def _rows(value: Any, what: str, where: str) -> Rows:
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        raise DeclarationError(f"{where}: {what} is a list of rows (dicts by column)")
    for row in value:
        if not isinstance(row, Mapping) or not all(isinstance(k, str) for k in row):
            raise DeclarationError(f"{where}: {what}: every row is a dict by column name, got {row!r}")
    return tuple(value)


def test(
    table: str,
    given: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    expect: Sequence[Mapping[str, Any]] = (),
    *,
    quarantined: Sequence[Mapping[str, Any]] | None = None,
    name: str | None = None,
) -> None:
    """Declare a unit test of `table`'s function: `given` rows per input table, the rows it must return (`expect`)
    and, for a table with row rules, the rows they must reject (`quarantined`, each with `reasons`)."""
    where = place(depth=2)
    given = given or {}
    if not isinstance(given, Mapping):
        raise DeclarationError(f"{where}: test({table!r}): given= maps each input table to its rows")
    checked = tuple((str(t), _rows(rows, f"given[{t!r}]", where)) for t, rows in given.items())
    expected = _rows(expect, "expect", where)
    rejected = None if quarantined is None else _rows(quarantined, "quarantined", where)
    declared = UnitTest(table, checked, expected, rejected, name or where, where, caller_module())
    # A module imported again (a reload) replaces its own earlier tests.
    UNIT_TESTS[:] = [t for t in UNIT_TESTS if (t.module, t.where) != (declared.module, declared.where)]
    UNIT_TESTS.append(declared)


def tests_of(modules: Iterable[str]) -> list[UnitTest]:
    """The tests declared by `modules` (imported already, as loading their registry does)."""
    names = list(modules)
    return [t for t in UNIT_TESTS if any(t.module == m or t.module.startswith(f"{m}.") for m in names)]


@dataclass(frozen=True)
class Outcome:
    """What one test found: passed, or the lines that say how the rows differ."""

    test: UnitTest
    passed: bool
    lines: tuple[str, ...] = ()


def frame(spark: SparkSession, rows: Rows, schema: StructType, what: str) -> DataFrame:
    """`rows` as a DataFrame of `schema` (missing columns NULL); a column the schema lacks, or a value that is not
    of its column's type, raises one line naming it."""
    names = set(schema.names)
    for i, row in enumerate(rows):
        unknown = sorted(set(row) - names)
        if unknown:
            raise ConfigError(
                f"{what}, row {i + 1}: no column {', '.join(unknown)} (columns: {', '.join(schema.names)})"
            )
    text = [(json.dumps(dict(row), default=str),) for row in rows]
    # Another name for the reader's own corrupt-record column, so that a given `_corrupt_record` is kept as data.
    parsed = F.from_json("j", schema, {"columnNameOfCorruptRecord": "\u0000unparsed"})
    df = spark.createDataFrame(text, "j string").select(parsed.alias("r")).select("r.*")
    for i, (row, got) in enumerate(zip(rows, df.collect(), strict=True)):
        for column, value in row.items():
            if value is None:
                continue
            out, data_type = got[column], schema[column].dataType
            # A value that does not convert reads as NULL; a decimal with more digits than its scale, rounded.
            if out is None or (isinstance(data_type, DecimalType) and Decimal(str(value)) != out):
                raise ConfigError(f"{what}, row {i + 1}: {column} = {value!r} is not a {data_type.simpleString()}")
    return df


def _declaration(t: UnitTest) -> Declaration:
    """The declaration of `t`'s table in `t`'s own dataset: of the tables of that name any package declared (a
    process may have loaded several datasets), the one whose module shares the longest package path with the
    test's module."""
    found = [d for d in DECLARED if d.name == t.table]
    if not found:
        raise ConfigError(f"{t.where}: no table {t.table} is declared")

    def shared(d: Declaration) -> int:
        count = 0
        for mine, theirs in zip(t.module.split("."), d.module.split("."), strict=False):
            if mine != theirs:
                break
            count += 1
        return count

    return max(reversed(found), key=shared)  # (the newest of equals: `max` keeps the first)


def _inputs(spark: SparkSession, t: UnitTest, d: Declaration, registry: Registry) -> list[DataFrame]:
    given = dict(t.given)
    if d.source is not None:
        extra = sorted(set(given) - {d.name})
        if extra:
            raise ConfigError(f"{t.where}: {d.name} reads landed rows: give them as given={{{d.name!r}: [...]}}")
        return [frame(spark, given.get(d.name, ()), landed_schema(d), f"{t.where}: given[{d.name!r}]")]
    tables = [p.table for p in d.params]
    extra = sorted(set(given) - set(tables))
    if extra:
        raise ConfigError(f"{t.where}: {d.name} does not read {', '.join(extra)} (it reads {', '.join(tables)})")
    return [
        frame(spark, given.get(p.table, ()), registry.get(p.table).output.schema, f"{t.where}: given[{p.table!r}]")
        for p in d.params
    ]


def _difference(actual: DataFrame, expected: Rows, what: str, where: str) -> list[str]:
    """Lines naming the rows `actual` has that `expected` does not, and the reverse (on the expected's columns)."""
    columns = list(dict.fromkeys(c for row in expected for c in row)) or actual.columns
    missing = [c for c in columns if c not in actual.columns]
    if missing:
        raise ConfigError(
            f"{where}: {what} rows name {', '.join(missing)}, not returned (it returns {', '.join(actual.columns)})"
        )
    types = {f.name: f for f in actual.schema.fields}
    shown = actual.select(*columns)
    wanted = frame(actual.sparkSession, expected, StructType([types[c] for c in columns]), f"{where}: {what}")
    lines = [f"  {what}: unexpected {_render(r.asDict(True))}" for r in shown.exceptAll(wanted).collect()]
    lines += [f"  {what}: missing    {_render(r.asDict(True))}" for r in wanted.exceptAll(shown).collect()]
    return lines


def _render(row: Mapping[str, Any]) -> str:
    return json.dumps(dict(row), default=str, sort_keys=False)


def run_test(spark: SparkSession, t: UnitTest, registry: Registry) -> Outcome:
    """Run `t` (`test`) on `spark`: its table's function on the given rows, compared with the expected rows."""
    d = _declaration(t)
    if d.fn is None:
        raise ConfigError(f"{t.where}: {t.table} has no function to test (it keeps its source's rows as read)")
    inputs = _inputs(spark, t, d, registry)
    try:
        if d.source is not None:
            out = d.fn(inputs[0])
        else:
            out = d.fn(**{p.name: df for p, df in zip(d.params, inputs, strict=True)})
        rules = getattr(registry.get(t.table).sink, "rules", ())
        checked = apply_rules(out, rules) if rules else None
        valid = out if checked is None else checked.filter(passes_rules()).drop(REASONS_COLUMN, WARNINGS_COLUMN)
        lines = _difference(valid, t.expect, "returned", t.where)
        if t.quarantined is not None:
            if checked is None:
                raise ConfigError(f"{t.where}: {t.table} has no row rules, so it quarantines nothing")
            rejected = checked.filter(~passes_rules()).withColumn(REASONS, F.array_sort(REASONS_COLUMN))
            rejected = rejected.drop(REASONS_COLUMN, WARNINGS_COLUMN)
            expected = tuple({**r, REASONS: sorted(r.get(REASONS, []))} for r in t.quarantined)
            lines += _difference(rejected, expected, "quarantined", t.where)
    except ConfigError:
        raise
    except Exception as exc:  # the author's function failed on the rows: its first line, no traceback
        return Outcome(t, False, (f"  the function failed: {first_line(exc)[:500]}",))
    return Outcome(t, not lines, tuple(lines))
