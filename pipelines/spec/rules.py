"""Row-level rules with actions like Delta Live Tables expectations: warn, quarantine, fail."""

from __future__ import annotations

import operator
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from functools import reduce
from typing import Literal

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from infra.errors import ConfigError
from infra.identifiers import is_column_name
from infra.spark import ANSI_MODE

Action = Literal["warn", "quarantine", "fail"]
ACTIONS: tuple[Action, ...] = ("warn", "quarantine", "fail")
REASONS_COLUMN = "_reasons"
WARNINGS_COLUMN = "_warnings"


@dataclass(frozen=True)
class Rule:
    """A row passes when `expr` (Spark SQL, written by the spec author) is TRUE; NULL counts as a failure."""

    name: str
    expr: str
    action: Action = "quarantine"
    description: str = ""

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ConfigError(f"rule {self.name!r}: action {self.action!r} is not one of {ACTIONS}")
        if not self.name.isidentifier():
            raise ConfigError(f"rule name {self.name!r} must be an identifier")

    def passes(self) -> Column:
        """A boolean column, never NULL."""
        return F.coalesce(F.expr(self.expr), F.lit(False))


@contextmanager
def _without_ansi(spark: SparkSession) -> Iterator[None]:
    """The session out of ANSI mode while a frame is built: Spark fixes each cast's and each arithmetic's ANSI
    behaviour when it analyses them (eagerly, as a column is added), so the rules of an ANSI session give NULL (a
    failure) where a value cannot be cast or divided, instead of failing the query."""
    if spark.conf.get(ANSI_MODE, "false") != "true":
        yield
        return
    spark.conf.set(ANSI_MODE, "false")
    try:
        yield
    finally:
        spark.conf.set(ANSI_MODE, "true")


def _failed_names(rules: list[Rule]) -> Column:
    none = F.array().cast("array<string>")
    if not rules:
        return none
    flags = [F.when(~r.passes(), F.lit(r.name)) for r in rules]
    # The NULLs (rules passed) taken out by a set difference, which Spark compiles; a `filter` lambda is evaluated
    # row by row by the interpreter (about a second per million rows). Rule names are unique, so nothing else goes.
    failed = F.array_except(F.array(*flags), F.array(F.lit(None).cast("string")))
    # Most rows pass every rule: they get the empty array without building and diffing one per row (the set
    # difference cost most of the rules' time, about 0.7 s per million rows).
    passed = reduce(operator.and_, [r.passes() for r in rules])
    return F.when(passed, none).otherwise(failed)


def _blocking(rules: tuple[Rule, ...]) -> list[Rule]:
    return [r for r in rules if r.action in ("quarantine", "fail")]


def apply_rules(df: DataFrame, rules: tuple[Rule, ...]) -> DataFrame:
    """Add `_reasons` (names of failed quarantine/fail rules) and `_warnings` (names of failed warn rules)."""
    warnings = [r for r in rules if r.action == "warn"]
    with _without_ansi(df.sparkSession):  # a rule that cannot be computed on a row fails that row
        return df.withColumn(REASONS_COLUMN, _failed_names(_blocking(rules))).withColumn(
            WARNINGS_COLUMN, _failed_names(warnings)
        )


def passes_rules() -> Column:
    """TRUE for a row that no quarantine or fail rule rejected (its `_reasons` is empty)."""
    return F.size(REASONS_COLUMN) == 0


def rule_failure_counts(rules: tuple[Rule, ...]) -> list[Column]:
    """Aggregate expressions counting the rows failing each rule, aliased `rule:<name>`."""
    out = []
    for r in rules:
        column = WARNINGS_COLUMN if r.action == "warn" else REASONS_COLUMN
        out.append(F.sum(F.array_contains(F.col(column), r.name).cast("long")).alias(f"rule:{r.name}"))
    return out


_INTERVAL = re.compile(r"^[1-9][0-9]* (second|minute|hour|day)s?$")


def time_range_condition(column: str, earliest: str, max_future: str, reference: str) -> str:
    """SQL that is TRUE when `column` is NULL or lies in [earliest, reference + max_future].

    `reference` is a column or `current_timestamp()`; all arguments are validated, never user text pasted into SQL.
    """
    for name in (column, *([] if reference == "current_timestamp()" else [reference])):
        if not is_column_name(name):
            raise ConfigError(f"event-time range: {name!r} is not a column name")
    try:
        date.fromisoformat(earliest)
    except ValueError:
        raise ConfigError(f"event-time range: earliest={earliest!r} is not a date (YYYY-MM-DD)") from None
    if not _INTERVAL.match(max_future):
        raise ConfigError(f"event-time range: max_future={max_future!r} is not like '1 day' or '6 hours'")
    return (
        f"{column} IS NULL OR ({column} >= TIMESTAMP '{earliest}' AND {column} <= {reference} + INTERVAL {max_future})"
    )


def plausible_time(
    column: str, earliest: str = "1970-01-01", max_future: str = "1 day", reference: str = "_ingested_at"
) -> Rule:
    """A quarantine rule for event times outside a plausible range: before `earliest`, or more than `max_future`
    after `reference` (by default when the row was ingested, which a replayed batch reads unchanged).

    One implausible value (year 1, year 9999) would otherwise move watermarks or break readers downstream.
    """
    return Rule(
        f"{column}_plausible",
        time_range_condition(column, earliest, max_future, reference),
        "quarantine",
        f"{column} is before {earliest} or more than {max_future} after {reference}",
    )


def key_rules(keys: tuple[str, ...], declared: tuple[Rule, ...] = ()) -> tuple[Rule, ...]:
    """A quarantine rule `<key>_present` per key column of a deduplicated table: a NULL key, or a text key of only
    white space, identifies nothing. A rule the author declares under the same name replaces it."""
    taken = {r.name for r in declared}
    return tuple(
        Rule(
            f"{key}_present",
            f"`{key}` IS NOT NULL AND CAST(`{key}` AS STRING) RLIKE '\\\\S'",  # some non-white-space character
            "quarantine",
            f"{key} is missing or blank",
        )
        for key in keys
        if is_column_name(key) and f"{key}_present" not in taken
    )


def landed_rules(upstream: str) -> tuple[Rule, ...]:
    """The rules every table refining landed rows applies first: a malformed line and a rejected file are
    quarantined, a field the landing schema does not declare is a warning (it stays in `upstream._rescued_data`)."""
    return (
        Rule(
            "well_formed",
            "_corrupt_record IS NULL",
            "quarantine",
            "line is not valid JSON or a field has the wrong type",
        ),
        Rule(
            "file_rejected",
            "_file_rejected IS NULL",
            "quarantine",
            f"the landed file was rejected whole (see {upstream}_files)",
        ),
        Rule(
            "no_rescued_data",
            "_rescued_data IS NULL",
            "warn",
            "the landed record has fields the schema does not declare "
            f"(kept in {upstream.split('.')[0]}._rescued_data)",
        ),
    )
