"""What a query's stateful operators judge late rows by, read off Spark's analyzed plan (planning only)."""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.spec.plans import grouped_without_event_time, has_watermark, late_bounds

SCHEMA = "t timestamp, k string, v int"


@pytest.fixture
def stream(spark, tmp_path):
    def make() -> DataFrame:
        return spark.readStream.schema(SCHEMA).json(str(tmp_path))

    return make


def _texts(query: DataFrame, inputs: list[DataFrame], times: list[str | None]) -> list[list[str]]:
    return [[str(c) for c in columns] for columns in late_bounds(query, inputs, times)]


def test_windows_are_judged_by_their_ends(stream):
    raw = stream()
    events = raw.withWatermark("t", "1 hour")
    (tumbling,) = _texts(events.groupBy(F.window("t", "5 minutes"), "k").count(), [raw], ["t"])
    assert len(tumbling) == 1 and "300000000" in tumbling[0]  # the end: start + 5 minutes (µs)
    (sliding,) = _texts(events.groupBy(F.window("t", "10 minutes", "5 minutes"), "k").count(), [raw], ["t"])
    assert len(sliding) == 2 and all("600000000" in s for s in sliding)  # one end per overlapping window
    assert sliding[0] != sliding[1]
    (session,) = _texts(events.groupBy(F.session_window("t", "30 minutes"), "k").count(), [raw], ["t"])
    assert len(session) == 1 and "30 minutes" in session[0]
    renamed = events.select(F.col("t").alias("at"), "k").groupBy(F.window("at", "5 minutes")).count()
    (through_alias,) = _texts(renamed, [raw], ["t"])
    assert len(through_alias) == 1 and "precisetimestampconversion(t)" in through_alias[0]  # on the input's `t`
    assert "(at)" not in through_alias[0]


def test_joins_judge_each_side_by_its_time_and_plain_groups_drop_nothing(stream):
    left_raw, right_raw = stream(), stream()
    left, right = left_raw.withWatermark("t", "1 hour"), right_raw.withWatermark("t", "1 hour")
    joined = left.select("k", F.col("t").alias("a")).join(
        right.select(F.col("k").alias("k2"), F.col("t").alias("b")),
        F.expr("k = k2 AND b BETWEEN a AND a + INTERVAL 5 MINUTES"),
    )
    sides = _texts(joined, [left_raw, right_raw], ["t", "t"])
    assert [len(s) for s in sides] == [1, 1]
    assert _texts(left.groupBy("k").count(), [left_raw], ["t"]) == [[]]  # update mode keeps every group
    assert _texts(left.select("k"), [left_raw], ["t"]) == [[]]  # no stateful operator: nothing dropped
    assert grouped_without_event_time(joined.groupBy("k").count()) == ["k"]
    assert grouped_without_event_time(left.groupBy(F.window("t", "5 minutes")).count()) is None
    assert has_watermark(joined) and not has_watermark(left_raw)
