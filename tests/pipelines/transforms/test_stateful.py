"""Per-key visit summaries (`pipelines/transforms/stateful.py`): what the state function emits and keeps.

`VisitSummary` runs its function through `applyInPandasWithState`, which only a streaming query can drive;
these tests call that per-key function directly with pandas batches and a `GroupState` at a chosen watermark,
so the merge, emit and timeout logic is checked in milliseconds without Spark:

- events less than the gap apart form one visit; a visit is emitted once the watermark reaches its end + gap;
- open visits are kept in the state (JSON) with an event-time timeout, and continue in the next call;
- a late event that bridges two open visits merges them; a timed-out call with no rows emits what closed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import Row
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.types import StringType, StructField, StructType

from infra.errors import ConfigError
from pipelines.transforms.stateful import VisitSummary

VISITS = VisitSummary("user_id", "ts", "category", "cost", gap_seconds=600)
STATE_SCHEMA = StructType([StructField("visits", StringType())])


def _ms(text: str) -> int:
    """Epoch milliseconds of a UTC time like '2026-01-01 10:00:00'."""
    return int(pd.Timestamp(text, tz="UTC").timestamp() * 1000)


def _us(text: str) -> int:
    return _ms(text) * 1000


def _state(watermark: str, visits: list[dict[str, Any]] | None = None, timed_out: bool = False) -> GroupState:
    """A key's state as the streaming engine hands it over: the stored visits (if any) and the watermark."""
    return GroupState(
        optionalValue=Row(visits=json.dumps(visits)) if visits is not None else Row(),
        batchProcessingTimeMs=0,
        eventTimeWatermarkMs=_ms(watermark),
        timeoutConf=GroupStateTimeout.EventTimeTimeout,
        hasTimedOut=timed_out,
        watermarkPresent=True,
        defined=visits is not None,
        updated=False,
        removed=False,
        timeoutTimestamp=GroupState.NO_TIMESTAMP,
        keyAsUnsafe=b"",
        valueSchema=STATE_SCHEMA,
    )


def _batch(*events: tuple[str, str, int]) -> pd.DataFrame:
    """(time, category, cost) events of one key, as the Python worker receives them (naive UTC times)."""
    return pd.DataFrame(
        {
            "user_id": ["u1"] * len(events),
            "ts": pd.to_datetime([t for t, _, _ in events]),
            "category": [c for _, c, _ in events],
            "cost": [a for _, _, a in events],
        }
    )


def _run(state: GroupState, *batches: pd.DataFrame) -> list[tuple]:
    """Call the visit function for key u1; the emitted rows as (key, start, end, events, distinct, cost)."""
    out: Iterator[pd.DataFrame] = VISITS._visit_function()(("u1",), iter(batches), state)
    rows = []
    for pdf in out:
        assert list(pdf.columns) == ["user_id", "visit_start", "visit_end", "events", "distinct_category", "cost"]
        for r in pdf.itertuples(index=False):
            rows.append((r[0], str(r[1]), str(r[2]), int(r[3]), int(r[4]), int(r[5])))
    return rows


def _stored(state: GroupState) -> list[tuple[int, int, int, list[str], int]]:
    """The open visits kept in the state as (start µs, end µs, events, labels, amount)."""
    return [(v["start"], v["end"], v["n"], v["labels"], v["amount"]) for v in json.loads(state.get[0])]


def _sent(state: GroupState) -> dict[str, Any]:
    """What the Python worker sends back to the engine about the state (timeout, removed, ...)."""
    return json.loads(state.json())


def test_gap_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="gap_seconds must be positive, got 0"):
        VisitSummary("user_id", "ts", "category", "cost", gap_seconds=0)


def test_output_schema_names_the_key_label_and_amount_columns() -> None:
    assert VISITS.output_schema == (
        "user_id string, visit_start timestamp, visit_end timestamp, events long, distinct_category long, cost long"
    )


def test_function_is_named_after_the_key() -> None:
    assert VISITS._visit_function().__name__ == "visits_by_user_id"


def test_closed_visit_is_emitted_and_open_one_is_kept_with_a_timeout() -> None:
    state = _state(watermark="2026-01-01 10:20:00")
    batch = _batch(
        ("2026-01-01 10:00:00", "a", 5),
        ("2026-01-01 10:05:00", "b", 3),  # 5 minutes later: same visit
        ("2026-01-01 10:30:00", "a", 2),  # 25 minutes later: a new visit, still open at 10:20
    )
    assert _run(state, batch) == [("u1", "2026-01-01 10:00:00", "2026-01-01 10:05:00", 2, 2, 8)]
    assert _stored(state) == [(_us("2026-01-01 10:30:00"), _us("2026-01-01 10:30:00"), 1, ["a"], 2)]
    # The timeout fires when the watermark passes it: one millisecond before the visit's end + gap.
    assert _sent(state)["timeoutTimestamp"] == _ms("2026-01-01 10:40:00") - 1


def test_open_visit_continues_in_the_next_call_and_closes_when_the_watermark_reaches_it() -> None:
    opened = [
        {"start": _us("2026-01-01 10:30:00"), "end": _us("2026-01-01 10:30:00"), "n": 1, "labels": ["a"], "amount": 2}
    ]
    state = _state(watermark="2026-01-01 10:45:00", visits=opened)
    rows = _run(state, _batch(("2026-01-01 10:35:00", "c", 1)))
    # Ends at 10:35, so it closes at 10:45: exactly the watermark.
    assert rows == [("u1", "2026-01-01 10:30:00", "2026-01-01 10:35:00", 2, 2, 3)]
    assert not state.exists and _sent(state)["removed"]


def test_events_exactly_the_gap_apart_are_two_visits() -> None:
    state = _state(watermark="2026-01-01 12:00:00")
    batch = _batch(("2026-01-01 10:00:00", "a", 1), ("2026-01-01 10:10:00", "a", 1))
    assert _run(state, batch) == [
        ("u1", "2026-01-01 10:00:00", "2026-01-01 10:00:00", 1, 1, 1),
        ("u1", "2026-01-01 10:10:00", "2026-01-01 10:10:00", 1, 1, 1),
    ]


def test_late_event_between_two_open_visits_merges_them() -> None:
    opened = [
        {"start": _us("2026-01-01 10:00:00"), "end": _us("2026-01-01 10:00:00"), "n": 1, "labels": ["a"], "amount": 1},
        {"start": _us("2026-01-01 10:15:00"), "end": _us("2026-01-01 10:15:00"), "n": 1, "labels": ["b"], "amount": 2},
    ]
    state = _state(watermark="2026-01-01 10:05:00", visits=opened)
    assert _run(state, _batch(("2026-01-01 10:08:00", "a", 4))) == []
    assert _stored(state) == [(_us("2026-01-01 10:00:00"), _us("2026-01-01 10:15:00"), 3, ["a", "b"], 7)]
    assert _sent(state)["timeoutTimestamp"] == _ms("2026-01-01 10:25:00") - 1


def test_timed_out_call_without_rows_emits_the_closed_visit() -> None:
    opened = [
        {
            "start": _us("2026-01-01 10:00:00"),
            "end": _us("2026-01-01 10:02:00"),
            "n": 3,
            "labels": ["a", "b"],
            "amount": 9,
        }
    ]
    state = _state(watermark="2026-01-01 10:12:00", visits=opened, timed_out=True)
    assert _run(state) == [("u1", "2026-01-01 10:00:00", "2026-01-01 10:02:00", 3, 2, 9)]
    assert not state.exists


def test_nothing_closes_before_the_watermark_reaches_end_plus_gap() -> None:
    state = _state(watermark="2026-01-01 10:09:59")
    assert _run(state, _batch(("2026-01-01 10:00:00", "a", 1))) == []
    assert _stored(state) == [(_us("2026-01-01 10:00:00"), _us("2026-01-01 10:00:00"), 1, ["a"], 1)]
