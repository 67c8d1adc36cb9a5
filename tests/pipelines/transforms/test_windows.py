"""Event-time windows (`pipelines/transforms/windows.py`) on a handful of timestamps, with hand-computed results.

- Configuration: the window kinds, when `slide` is required or refused, at least one aggregate, the keys.
- Tumbling, sliding and session windows: which window each event falls in, per group, with each aggregate;
  the output columns are `window_start`, `window_end`, the group columns, then the aggregates.

Static DataFrames only (the runner applies the watermark before the transform; a batch has none).
"""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from infra.errors import ConfigError
from pipelines.transforms.windows import KINDS, WindowAggregate

SUM_AND_COUNT = (("events", "count(*)"), ("cost", "sum(cost)"))


def _events(spark: SparkSession, rows: list[tuple[str, str, int]]) -> DataFrame:
    """(group, event time as UTC text, cost) rows with `ts` a timestamp."""
    df = spark.createDataFrame(rows, "grp string, ts string, cost int")
    return df.withColumn("ts", F.col("ts").cast("timestamp"))


def _rows(df: DataFrame) -> list[tuple]:
    """The output rows with the window bounds as UTC text, sorted."""
    bounds = [F.date_format(c, "HH:mm:ss").alias(c) for c in ("window_start", "window_end")]
    rest = [c for c in df.columns if c not in ("window_start", "window_end")]
    return sorted(tuple(r) for r in df.select(*bounds, *rest).collect())


# --- configuration -----------------------------------------------------------------------------------------


def test_kinds_are_tumbling_sliding_and_session() -> None:
    assert KINDS == ("tumbling", "sliding", "session")


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ConfigError, match="window kind 'hopping' is not one of"):
        WindowAggregate("ts", "hopping", "5 minutes")  # type: ignore[arg-type]


def test_sliding_window_needs_a_slide() -> None:
    with pytest.raises(ConfigError, match="a sliding window needs slide"):
        WindowAggregate("ts", "sliding", "10 minutes")


@pytest.mark.parametrize("kind", ["tumbling", "session"])
def test_tumbling_and_session_windows_take_no_slide(kind: str) -> None:
    with pytest.raises(ConfigError, match=f"a {kind} window takes no slide"):
        WindowAggregate("ts", kind, "10 minutes", slide="5 minutes")  # type: ignore[arg-type]


def test_at_least_one_aggregate_is_required() -> None:
    with pytest.raises(ConfigError, match="needs at least one"):
        WindowAggregate("ts", "tumbling", "5 minutes", aggregates=())


def test_keys_are_the_window_bounds_then_the_groups() -> None:
    assert WindowAggregate("ts", "tumbling", "5 minutes", group_by=("a", "b")).keys == (
        "window_start",
        "window_end",
        "a",
        "b",
    )
    assert WindowAggregate("ts", "session", "5 minutes").keys == ("window_start", "window_end")


# --- tumbling ----------------------------------------------------------------------------------------------


def test_tumbling_windows_count_and_sum_per_group(spark: SparkSession) -> None:
    events = _events(
        spark,
        [
            ("a", "2026-01-01 10:00:00", 1),
            ("a", "2026-01-01 10:04:59", 2),
            ("a", "2026-01-01 10:05:00", 4),  # a window's end belongs to the next window
            ("a", "2026-01-01 10:12:30", 8),
            ("b", "2026-01-01 10:01:00", 16),
        ],
    )
    out = WindowAggregate("ts", "tumbling", "5 minutes", group_by=("grp",), aggregates=SUM_AND_COUNT)(events)
    assert out.columns == ["window_start", "window_end", "grp", "events", "cost"]
    assert _rows(out) == [
        ("10:00:00", "10:05:00", "a", 2, 3),
        ("10:00:00", "10:05:00", "b", 1, 16),
        ("10:05:00", "10:10:00", "a", 1, 4),
        ("10:10:00", "10:15:00", "a", 1, 8),
    ]


def test_tumbling_windows_without_groups_use_the_default_event_count(spark: SparkSession) -> None:
    events = _events(spark, [("a", "2026-01-01 10:00:00", 1), ("b", "2026-01-01 10:09:59", 1)])
    out = WindowAggregate("ts", "tumbling", "10 minutes")(events)
    assert out.columns == ["window_start", "window_end", "events"]
    assert _rows(out) == [("10:00:00", "10:10:00", 2)]


def test_window_bounds_are_timestamps(spark: SparkSession) -> None:
    events = _events(spark, [("a", "2026-01-01 10:00:00", 1)])
    out = WindowAggregate("ts", "tumbling", "1 hour")(events)
    assert [out.schema[c].dataType.simpleString() for c in ("window_start", "window_end")] == [
        "timestamp",
        "timestamp",
    ]
    row = out.select(F.col("window_start").cast("string"), F.col("window_end").cast("string")).first()
    assert tuple(row) == ("2026-01-01 10:00:00", "2026-01-01 11:00:00")


# --- sliding -----------------------------------------------------------------------------------------------


def test_sliding_windows_put_each_event_in_every_window_covering_it(spark: SparkSession) -> None:
    events = _events(
        spark,
        [
            ("a", "2026-01-01 10:02:00", 1),  # [09:55, 10:05) and [10:00, 10:10)
            ("a", "2026-01-01 10:07:00", 10),  # [10:00, 10:10) and [10:05, 10:15)
            ("b", "2026-01-01 10:05:00", 100),  # [10:00, 10:10) and [10:05, 10:15)
        ],
    )
    window = WindowAggregate(
        "ts", "sliding", "10 minutes", slide="5 minutes", group_by=("grp",), aggregates=SUM_AND_COUNT
    )
    assert _rows(window(events)) == [
        ("09:55:00", "10:05:00", "a", 1, 1),
        ("10:00:00", "10:10:00", "a", 2, 11),
        ("10:00:00", "10:10:00", "b", 1, 100),
        ("10:05:00", "10:15:00", "a", 1, 10),
        ("10:05:00", "10:15:00", "b", 1, 100),
    ]


# --- session -----------------------------------------------------------------------------------------------


def test_session_windows_close_a_gap_after_each_keys_last_event(spark: SparkSession) -> None:
    events = _events(
        spark,
        [
            ("u1", "2026-01-01 10:00:00", 1),
            ("u1", "2026-01-01 10:05:00", 2),
            ("u1", "2026-01-01 10:14:00", 4),  # 9 minutes after the last one: same session
            ("u1", "2026-01-01 10:30:00", 8),  # 16 minutes after: a new session
            ("u2", "2026-01-01 10:03:00", 16),
        ],
    )
    window = WindowAggregate("ts", "session", "10 minutes", group_by=("grp",), aggregates=SUM_AND_COUNT)
    assert _rows(window(events)) == [
        ("10:00:00", "10:24:00", "u1", 3, 7),
        ("10:03:00", "10:13:00", "u2", 1, 16),
        ("10:30:00", "10:40:00", "u1", 1, 8),
    ]


def test_aggregates_are_any_spark_sql_aggregate(spark: SparkSession) -> None:
    events = _events(
        spark,
        [("a", "2026-01-01 10:00:00", 3), ("b", "2026-01-01 10:01:00", 5), ("a", "2026-01-01 10:02:00", 3)],
    )
    window = WindowAggregate(
        "ts",
        "session",
        "2 minutes",
        aggregates=(("groups", "count(DISTINCT grp)"), ("top", "max(cost)"), ("last_at", "max(ts)")),
    )
    out = window(events).withColumn("last_at", F.date_format("last_at", "HH:mm:ss"))
    assert _rows(out) == [("10:00:00", "10:04:00", 2, 5, "10:02:00")]
