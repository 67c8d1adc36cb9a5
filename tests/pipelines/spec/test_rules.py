"""Row rules: what `pipelines/spec/rules.py` computes, and what each rule of the demo datasets accepts.

- `Rule` validates its action and name, and a NULL rule result is a failure.
- `apply_rules` puts the names of failed quarantine/fail rules in `_reasons` and of failed warn rules in
  `_warnings` (rule order, empty arrays when nothing failed); `passes_rules` keeps rows with no reason;
  `rule_failure_counts` counts the failures per rule.
- `time_range_condition` / `plausible_time`: the exact bounds, and every argument validated before it is put
  into SQL.
- The e-commerce silver rules (`SILVER_RULES`): one row that passes them all, and for each rule a row failing
  exactly that rule.

A few rows built in memory per test; no streams, no tables.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from infra.errors import ConfigError
from pipelines.authoring.load import load_registry
from pipelines.spec.rules import (
    ACTIONS,
    REASONS_COLUMN,
    WARNINGS_COLUMN,
    Rule,
    apply_rules,
    passes_rules,
    plausible_time,
    rule_failure_counts,
    time_range_condition,
)

SILVER_RULES = load_registry(["pipelines.datasets.ecommerce"]).get("silver.events").sink.rules


def _timestamps(df: DataFrame, *columns: str) -> DataFrame:
    """Cast text columns to timestamps in Spark (session time zone UTC), independent of the local time zone."""
    for column in columns:
        df = df.withColumn(column, F.col(column).cast("timestamp"))
    return df


def _outcomes(df: DataFrame, key: str) -> dict[Any, tuple[list[str], list[str]]]:
    """key -> (reasons, warnings) of every row (only these columns are collected: year 1 is no Python datetime)."""
    rows = df.select(key, REASONS_COLUMN, WARNINGS_COLUMN).collect()
    return {row[key]: (list(row[REASONS_COLUMN]), list(row[WARNINGS_COLUMN])) for row in rows}


# --- Rule ----------------------------------------------------------------------------------------------------


def test_actions_are_warn_quarantine_and_fail() -> None:
    assert ACTIONS == ("warn", "quarantine", "fail")


def test_rule_default_action_is_quarantine() -> None:
    assert Rule("positive", "x > 0").action == "quarantine"


def test_rule_rejects_an_unknown_action() -> None:
    with pytest.raises(ConfigError, match=r"rule 'positive': action 'drop' is not one of"):
        Rule("positive", "x > 0", "drop")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["has space", "1st", "a-b", ""])
def test_rule_name_must_be_an_identifier(name: str) -> None:
    with pytest.raises(ConfigError, match="must be an identifier"):
        Rule(name, "x > 0")


def test_rule_passes_is_false_not_null_when_the_expression_is_null(spark: SparkSession) -> None:
    df = spark.createDataFrame([(1, 5), (2, -5), (3, None)], "id int, x int")
    rows = df.select("id", Rule("positive", "x > 0").passes().alias("ok")).collect()
    assert {r.id: r.ok for r in rows} == {1: True, 2: False, 3: False}


# --- apply_rules / rule_failure_counts -----------------------------------------------------------------------

RULES = (
    Rule("small", "x < 10", "warn"),
    Rule("positive", "x > 0", "quarantine"),
    Rule("even", "x % 2 = 0", "fail"),
)


@pytest.fixture
def numbers(spark: SparkSession) -> DataFrame:
    rows = [(1, 4), (2, 3), (3, -2), (4, 12), (5, -1), (6, None)]
    return spark.createDataFrame(rows, "id int, x int")


def test_apply_rules_puts_blocking_failures_in_reasons_and_warn_failures_in_warnings(numbers: DataFrame) -> None:
    assert _outcomes(apply_rules(numbers, RULES), "id") == {
        1: ([], []),
        2: (["even"], []),
        3: (["positive"], []),
        4: ([], ["small"]),
        5: (["positive", "even"], []),
        6: (["positive", "even"], ["small"]),  # NULL fails every rule
    }


def test_apply_rules_keeps_the_columns_and_adds_two_string_arrays(numbers: DataFrame) -> None:
    out = apply_rules(numbers, RULES)
    assert out.columns == ["id", "x", REASONS_COLUMN, WARNINGS_COLUMN]
    assert out.schema[REASONS_COLUMN].dataType.simpleString() == "array<string>"
    assert out.schema[WARNINGS_COLUMN].dataType.simpleString() == "array<string>"


def test_apply_rules_without_rules_gives_empty_arrays(numbers: DataFrame) -> None:
    out = apply_rules(numbers, ())
    assert out.schema[REASONS_COLUMN].dataType.simpleString() == "array<string>"
    assert _outcomes(out, "id") == {k: ([], []) for k in range(1, 7)}


def test_apply_rules_with_only_warn_rules_never_gives_reasons(numbers: DataFrame) -> None:
    out = _outcomes(apply_rules(numbers, (Rule("small", "x < 10", "warn"),)), "id")
    assert {k: reasons for k, (reasons, _) in out.items()} == {k: [] for k in range(1, 7)}
    assert {k for k, (_, warnings) in out.items() if warnings == ["small"]} == {4, 6}


def test_passes_rules_ignores_warnings(numbers: DataFrame) -> None:
    out = apply_rules(numbers, RULES).filter(passes_rules())
    assert sorted(r.id for r in out.select("id").collect()) == [1, 4]


def test_rule_failure_counts_counts_each_rule_from_its_own_column(numbers: DataFrame) -> None:
    counts = apply_rules(numbers, RULES).agg(*rule_failure_counts(RULES)).collect()[0].asDict()
    assert counts == {"rule:small": 2, "rule:positive": 3, "rule:even": 3}


def test_rule_failure_counts_is_zero_for_a_rule_nobody_fails(numbers: DataFrame) -> None:
    rules = (Rule("known", "id IS NOT NULL", "fail"), Rule("tiny", "id < 100", "warn"))
    counts = apply_rules(numbers, rules).agg(*rule_failure_counts(rules)).collect()[0].asDict()
    assert counts == {"rule:known": 0, "rule:tiny": 0}


# --- time_range_condition / plausible_time ------------------------------------------------------------------


def test_time_range_condition_bounds_are_inclusive_and_null_passes(spark: SparkSession) -> None:
    condition = time_range_condition("t", "2026-01-01", "6 hours", "ref")
    rows = [
        ("null", None),
        ("at_earliest", "2026-01-01 00:00:00"),
        ("before_earliest", "2025-12-31 23:59:59"),
        ("at_max_future", "2026-01-10 18:00:00"),
        ("after_max_future", "2026-01-10 18:00:01"),
        ("at_reference", "2026-01-10 12:00:00"),
    ]
    df = _timestamps(
        spark.createDataFrame(rows, "case string, t string").withColumn("ref", F.lit("2026-01-10 12:00:00")),
        "t",
        "ref",
    )
    result = {r.case: r.ok for r in df.select("case", F.expr(condition).alias("ok")).collect()}
    assert result == {
        "null": True,
        "at_earliest": True,
        "before_earliest": False,
        "at_max_future": True,
        "after_max_future": False,
        "at_reference": True,
    }


def test_time_range_condition_against_the_current_time(spark: SparkSession) -> None:
    condition = time_range_condition("t", "1970-01-01", "1 day", "current_timestamp()")
    df = _timestamps(spark.createDataFrame([("now", "2000-01-01"), ("y9999", "9999-12-31")], "case string, t string"))
    df = df.withColumn(
        "t", F.when(F.col("case") == "now", F.current_timestamp()).otherwise(F.col("t").cast("timestamp"))
    )
    assert {r.case: r.ok for r in df.select("case", F.expr(condition).alias("ok")).collect()} == {
        "now": True,
        "y9999": False,
    }


@pytest.mark.parametrize("max_future", ["1 day", "2 days", "6 hours", "30 minutes", "1 second"])
def test_time_range_condition_accepts_plain_intervals(max_future: str) -> None:
    assert f"INTERVAL {max_future}" in time_range_condition("t", "1970-01-01", max_future, "ref")


@pytest.mark.parametrize(
    ("column", "earliest", "max_future", "reference", "message"),
    [
        ("t; DROP TABLE x", "1970-01-01", "1 day", "ref", "is not a column name"),
        ("Event Time", "1970-01-01", "1 day", "ref", "is not a column name"),
        ("t", "1970-01-01", "1 day", "now()", "is not a column name"),
        ("t", "1970-13-01", "1 day", "ref", "is not a date"),
        ("t", "1970-01-01' OR '1'='1", "1 day", "ref", "is not a date"),
        ("t", "1970-01-01", "1 week", "ref", "is not like '1 day'"),
        ("t", "1970-01-01", "0 days", "ref", "is not like '1 day'"),
        ("t", "1970-01-01", "1 day) OR (true", "ref", "is not like '1 day'"),
    ],
)
def test_time_range_condition_rejects_anything_but_names_dates_and_intervals(
    column: str, earliest: str, max_future: str, reference: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        time_range_condition(column, earliest, max_future, reference)


def test_plausible_time_is_a_quarantine_rule_against_the_ingestion_time() -> None:
    rule = plausible_time("event_time")
    assert (rule.name, rule.action) == ("event_time_plausible", "quarantine")
    assert rule.expr == time_range_condition("event_time", "1970-01-01", "1 day", "_ingested_at")
    assert rule.description == "event_time is before 1970-01-01 or more than 1 day after _ingested_at"


def test_plausible_time_with_its_own_bounds(spark: SparkSession) -> None:
    rule = plausible_time("ts", earliest="2020-01-01", max_future="1 hour", reference="seen")
    rows = [
        (1, "2019-12-31 23:59:59"),
        (2, "2020-01-01 00:00:00"),
        (3, "2026-01-01 01:00:00"),
        (4, "2026-01-01 01:00:01"),
    ]
    df = _timestamps(
        spark.createDataFrame(rows, "id int, ts string").withColumn("seen", F.lit("2026-01-01")), "ts", "seen"
    )
    assert _outcomes(apply_rules(df, (rule,)), "id") == {
        1: (["ts_plausible"], []),
        2: ([], []),
        3: ([], []),
        4: (["ts_plausible"], []),
    }


# --- the e-commerce silver rules ----------------------------------------------------------------------------

# Text columns; the timestamps and the amount are cast in Spark.
SILVER_COLUMNS = (
    "case string, event_id string, event_type string, event_time string, user_id string, quantity int, "
    "amount string, currency string, _corrupt_record string, _file_rejected string, "
    "_rescued_data string, _ingested_at string"
)
GOOD = {
    "event_id": "e1",
    "event_type": "order",
    "event_time": "2026-01-01 10:00:00",
    "user_id": "u1",
    "quantity": 2,
    "amount": "10.00",
    "currency": "USD",
    "_corrupt_record": None,
    "_file_rejected": None,
    "_rescued_data": None,
    "_ingested_at": "2026-01-01 10:05:00",
}
# case -> (changes to the good row, expected reasons, expected warnings)
SILVER_CASES: dict[str, tuple[dict[str, Any], list[str], list[str]]] = {
    "good": ({}, [], []),
    "page_view_without_price": (
        {"event_type": "page_view", "quantity": None, "amount": None, "currency": None},
        [],
        [],
    ),
    "event_time_one_day_after_ingestion": ({"event_time": "2026-01-02 10:05:00"}, [], []),
    "corrupt": ({"_corrupt_record": '{"event_id": '}, ["well_formed"], []),
    "file_rejected": ({"_file_rejected": "most lines are corrupt"}, ["file_rejected"], []),
    "rescued": ({"_rescued_data": '{"coupon":"X"}'}, [], ["no_rescued_data"]),
    "null_event_id": ({"event_id": None}, ["event_id_present"], []),
    "empty_event_id": ({"event_id": ""}, ["event_id_present"], []),
    "blank_event_id": ({"event_id": " \t "}, ["event_id_present"], []),
    "null_event_time": ({"event_time": None}, ["event_time_present"], []),
    "year_one": ({"event_time": "0001-01-01 00:00:00"}, ["event_time_plausible"], []),
    "before_1970": ({"event_time": "1969-12-31 23:59:59"}, ["event_time_plausible"], []),
    "over_a_day_after_ingestion": ({"event_time": "2026-01-02 10:05:01"}, ["event_time_plausible"], []),
    "null_user": ({"user_id": None}, ["user_id_present"], []),
    "unknown_event_type": ({"event_type": "refund"}, ["event_type_known"], []),
    "upper_case_event_type": ({"event_type": "ORDER"}, ["event_type_known"], []),
    "null_event_type": ({"event_type": None}, ["event_type_known"], []),
    "order_zero_quantity": ({"quantity": 0}, ["order_is_priced"], []),
    "order_negative_amount": ({"amount": "-0.01"}, ["order_is_priced"], []),
    "order_null_amount": ({"amount": None}, ["order_is_priced"], []),
    "order_unknown_currency": ({"currency": "JPY"}, ["order_is_priced"], []),
    "several": (
        {"_corrupt_record": "x", "user_id": None, "_rescued_data": '{"a":"1"}'},
        ["well_formed", "user_id_present"],
        ["no_rescued_data"],
    ),
}


@pytest.fixture
def silver_outcomes(spark: SparkSession) -> dict[Any, tuple[list[str], list[str]]]:
    rows = []
    for case, (changes, _, _) in SILVER_CASES.items():
        values = {**GOOD, **changes}
        rows.append((case, *(values[name] for name in GOOD)))
    df = spark.createDataFrame(rows, SILVER_COLUMNS)
    df = _timestamps(df, "event_time", "_ingested_at").withColumn("amount", F.col("amount").cast("decimal(12,2)"))
    return _outcomes(apply_rules(df, SILVER_RULES), "case")


def test_silver_rule_actions() -> None:
    assert {r.name: r.action for r in SILVER_RULES} == {
        "well_formed": "quarantine",
        "file_rejected": "quarantine",
        "no_rescued_data": "warn",
        "event_id_present": "quarantine",
        "event_time_present": "quarantine",
        "event_time_plausible": "quarantine",
        "user_id_present": "quarantine",
        "event_type_known": "quarantine",
        "order_is_priced": "quarantine",
    }


def test_every_silver_rule_has_a_failing_case() -> None:
    failed = {name for _, reasons, warnings in SILVER_CASES.values() for name in (*reasons, *warnings)}
    assert failed == {r.name for r in SILVER_RULES}


def test_silver_rules_on_passing_and_failing_rows(silver_outcomes: dict[Any, tuple[list[str], list[str]]]) -> None:
    expected = {case: (reasons, warnings) for case, (_, reasons, warnings) in SILVER_CASES.items()}
    assert silver_outcomes == expected
