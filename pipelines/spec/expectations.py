"""Dataset-level expectations declared next to a table spec, run by Great Expectations as Dagster asset checks.

An `Expectation` is plain data (no Great Expectations import here: GX is slow to import and only the check
that runs it needs it). Build them with the constructors below; each carries a severity:

- `error`: part of the table's blocking check; when it fails, assets downstream of the table do not materialize.
- `warn`: part of the table's non-blocking check; the failure is recorded and the pipeline goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from infra.errors import ConfigError

Severity = Literal["warn", "error"]
SEVERITIES: tuple[Severity, ...] = ("error", "warn")
Kind = Literal[
    "not_null",
    "unique",
    "in_set",
    "between",
    "row_count",
    "row_count_vs_upstream",
    "fresh",
    "schema",
    "totals_match_upstream",
]
# Kinds Great Expectations evaluates; `totals_match_upstream` is a cross-table reconciliation done in Spark.
GX_KINDS: frozenset[str] = frozenset(
    {"not_null", "unique", "in_set", "between", "row_count", "row_count_vs_upstream", "fresh", "schema"}
)
# Kinds that judge each row on its own (or, for `unique`, against the other rows): with no row allowed to fail,
# such an expectation holds for a table when it holds for each part of it.
ROW_KINDS: frozenset[str] = frozenset({"not_null", "unique", "in_set", "between"})
Scalar = int | float | str


@dataclass(frozen=True)
class Expectation:
    """One dataset-level expectation on a table. Use the constructors (`not_null`, `unique`, ...) to build one."""

    kind: Kind
    columns: tuple[str, ...] = ()
    severity: Severity = "error"
    values: tuple[Scalar, ...] = ()
    min_value: Scalar | None = None
    max_value: Scalar | None = None
    # Fraction of rows that must meet a row-level expectation (1.0 = every row).
    mostly: float = 1.0
    upstream: str | None = None
    within: timedelta | None = None
    # For `totals_match_upstream`: (column of this table, Spark SQL aggregate over the upstream table) pairs,
    # and the upstream rows that feed this table.
    measures: tuple[tuple[str, str], ...] = ()
    where: str | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ConfigError(f"expectation {self.label}: severity {self.severity!r} is not one of {SEVERITIES}")
        if not 0.0 < self.mostly <= 1.0:
            raise ConfigError(f"expectation {self.label}: mostly={self.mostly!r} must be in (0, 1]")
        for column in self.columns:
            if not column.isidentifier():
                raise ConfigError(f"expectation {self.kind}: column name {column!r} is not an identifier")

    @property
    def column(self) -> str:
        """The single column of a column expectation."""
        return self.columns[0]

    @property
    def label(self) -> str:
        """A short, unique-per-table, human-readable name, used in check metadata and reports."""
        cols = ", ".join(self.columns)
        if self.kind == "not_null":
            text = f"{cols} not null"
        elif self.kind == "unique":
            text = f"({cols}) unique" if len(self.columns) > 1 else f"{cols} unique"
        elif self.kind == "in_set":
            text = f"{cols} in {{{', '.join(map(str, self.values))}}}"
        elif self.kind == "between":
            text = f"{cols} {_range(self.min_value, self.max_value)}"
        elif self.kind == "row_count":
            text = f"row count {_range(self.min_value, self.max_value)}"
        elif self.kind == "row_count_vs_upstream":
            text = f"row count {_range(self.min_value, self.max_value, f'x {self.upstream}')}"
        elif self.kind == "fresh":
            assert self.within is not None
            text = f"newest {cols} within {_duration(self.within)}"
        elif self.kind == "schema":
            text = "schema matches the spec"
        else:
            text = f"totals match {self.upstream}"
        if self.mostly < 1.0:
            text += f" (mostly {self.mostly:g})"
        return text


def _range(low: Scalar | None, high: Scalar | None, unit: str = "") -> str:
    if low is not None and high is not None:
        return f"between {low}{unit} and {high}{unit}"
    return f">= {low}{unit}" if low is not None else f"<= {high}{unit}"


def _duration(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} seconds"


def not_null(column: str, severity: Severity = "error", mostly: float = 1.0) -> Expectation:
    """Every row (or the `mostly` fraction) has a value in `column`."""
    return Expectation("not_null", (column,), severity, mostly=mostly)


def unique(*columns: str, severity: Severity = "error") -> Expectation:
    """No two rows share the same value of `columns` (one column, or a compound key)."""
    if not columns:
        raise ConfigError("unique() needs at least one column")
    return Expectation("unique", tuple(columns), severity)


def in_set(column: str, values: tuple[Scalar, ...], severity: Severity = "error", mostly: float = 1.0) -> Expectation:
    """Non-null values of `column` are among `values`."""
    if not values:
        raise ConfigError(f"in_set({column!r}) needs at least one value")
    return Expectation("in_set", (column,), severity, values=tuple(values), mostly=mostly)


def between(
    column: str,
    min_value: Scalar | None = None,
    max_value: Scalar | None = None,
    severity: Severity = "error",
    mostly: float = 1.0,
) -> Expectation:
    """Non-null values of `column` lie within [min_value, max_value] (either bound may be open)."""
    if min_value is None and max_value is None:
        raise ConfigError(f"between({column!r}) needs min_value or max_value")
    return Expectation("between", (column,), severity, min_value=min_value, max_value=max_value, mostly=mostly)


def row_count(min_rows: int | None = None, max_rows: int | None = None, severity: Severity = "error") -> Expectation:
    """The table holds between `min_rows` and `max_rows` rows."""
    if min_rows is None and max_rows is None:
        raise ConfigError("row_count() needs min_rows or max_rows")
    return Expectation("row_count", (), severity, min_value=min_rows, max_value=max_rows)


def row_count_vs_upstream(
    upstream: str, min_ratio: float | None = None, max_ratio: float | None = None, severity: Severity = "error"
) -> Expectation:
    """The table's row count is within [min_ratio, max_ratio] times the row count of table `upstream`."""
    if min_ratio is None and max_ratio is None:
        raise ConfigError(f"row_count_vs_upstream({upstream!r}) needs min_ratio or max_ratio")
    return Expectation(
        "row_count_vs_upstream", (), severity, min_value=min_ratio, max_value=max_ratio, upstream=upstream
    )


def fresh(column: str, within: timedelta, severity: Severity = "warn") -> Expectation:
    """The newest value of timestamp `column` is no older than `within` (wall clock, UTC)."""
    if within <= timedelta(0):
        raise ConfigError(f"fresh({column!r}): within must be positive, got {within}")
    return Expectation("fresh", (column,), severity, within=within)


def schema_matches(severity: Severity = "error") -> Expectation:
    """The table has exactly the columns its spec declares, in order, each of the declared Spark type."""
    return Expectation("schema", (), severity)


def totals_match_upstream(
    upstream: str, measures: dict[str, str], where: str | None = None, severity: Severity = "error"
) -> Expectation:
    """Per key of this table, each measure equals the aggregate over `upstream` rows (filtered by `where`).

    `measures` maps a column of this table to a Spark SQL aggregate over the upstream table, e.g.
    `{"revenue": "sum(amount)"}`. Checked by the reconciliation check (a cross-table comparison), not by GX.
    """
    if not measures:
        raise ConfigError(f"totals_match_upstream({upstream!r}) needs at least one measure")
    for column in measures:
        if not column.isidentifier():
            raise ConfigError(f"totals_match_upstream({upstream!r}): measure {column!r} is not a column name")
    return Expectation(
        "totals_match_upstream", (), severity, upstream=upstream, measures=tuple(measures.items()), where=where
    )


def validate_suite(
    table: str,
    columns: list[str],
    keys: tuple[str, ...],
    expectations: tuple[Expectation, ...],
    known_tables: set[str],
) -> None:
    """Raise ConfigError naming `table` and the expectation when it refers to a missing column or table."""
    labels: set[str] = set()
    for exp in expectations:
        if not isinstance(exp, Expectation):
            raise ConfigError(f"table {table!r}: expectations must be Expectation objects, got {exp!r}")
        if exp.label in labels:
            raise ConfigError(f"table {table!r}: expectation {exp.label!r} is declared twice")
        labels.add(exp.label)
        missing = [c for c in (*exp.columns, *(m for m, _ in exp.measures)) if c not in columns]
        if missing:
            raise ConfigError(
                f"table {table!r}: expectation {exp.label!r} names column(s) {missing} that the table does not have "
                f"(columns: {', '.join(columns)})"
            )
        if exp.upstream is not None and exp.upstream not in known_tables:
            raise ConfigError(
                f"table {table!r}: expectation {exp.label!r} refers to {exp.upstream!r}, which is not in the registry"
            )
        if exp.kind == "totals_match_upstream" and not keys:
            raise ConfigError(f"table {table!r}: {exp.label!r} compares per key, but the spec declares no keys")
