"""Arbitrary stateful processing: per-key visit summaries with `applyInPandasWithState` and an event-time timeout.

A visit is a run of a key's events with no gap of `gap_seconds` or more. Its state (the key's open visits, kept
as JSON in the state store of the query's checkpoint) survives between runs; a visit is emitted once the
watermark passes its last event plus the gap, so it is final, like a session window. Events may arrive out of
order within the watermark: they are merged into whichever open visits they touch.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from infra.errors import ConfigError

_US = 1_000_000
_EPOCH = pd.Timestamp("1970-01-01")


@dataclass(frozen=True)
class VisitSummary:
    """Callable as a spec transform: one output row per finished visit of each `key`.

    Output: key, visit_start, visit_end (the last event), events, distinct values of `label_column`, and the
    sum of `amount_column`.
    """

    key: str
    time_column: str
    label_column: str
    amount_column: str
    gap_seconds: int

    def __post_init__(self) -> None:
        if self.gap_seconds <= 0:
            raise ConfigError(f"VisitSummary gap_seconds must be positive, got {self.gap_seconds}")

    @property
    def output_schema(self) -> str:
        """The DDL of the emitted rows."""
        return (
            f"{self.key} string, visit_start timestamp, visit_end timestamp, events long, "
            f"distinct_{self.label_column} long, {self.amount_column} long"
        )

    def __call__(self, df: DataFrame) -> DataFrame:
        """Group the (watermarked) stream by key and summarize visits with state and an event-time timeout."""
        rows = df.select(self.key, self.time_column, self.label_column, self.amount_column)
        return rows.groupBy(self.key).applyInPandasWithState(
            self._visit_function(),
            outputStructType=self.output_schema,
            stateStructType="visits string",
            outputMode="append",
            timeoutConf=GroupStateTimeout.EventTimeTimeout,
        )

    def _visit_function(self):
        # Plain values only: the function is pickled to the Python workers.
        key_col, time_col, label_col, amount_col = self.key, self.time_column, self.label_column, self.amount_column
        gap_us = self.gap_seconds * _US

        def summarize(key: tuple, batches: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
            visits: list[dict[str, Any]] = json.loads(state.get[0]) if state.exists else []
            for pdf in batches:
                times = (pd.to_datetime(pdf[time_col]) - _EPOCH) // pd.Timedelta(microseconds=1)
                for t, label, amount in zip(times, pdf[label_col], pdf[amount_col], strict=True):
                    visits.append(
                        {"start": int(t), "end": int(t), "n": 1, "labels": [str(label)], "amount": int(amount)}
                    )
            visits = _merge_visits(visits, gap_us)
            watermark_us = max(state.getCurrentWatermarkMs(), 0) * 1000
            done = [v for v in visits if v["end"] + gap_us <= watermark_us]
            open_visits = [v for v in visits if v["end"] + gap_us > watermark_us]
            if open_visits:
                state.update((json.dumps(open_visits),))
                # Timeouts fire when the watermark moves past the timestamp: one ms early = "reaches the end".
                closes_ms = min(v["end"] + gap_us for v in open_visits) // 1000 - 1
                state.setTimeoutTimestamp(max(closes_ms, state.getCurrentWatermarkMs()))
            elif state.exists:
                state.remove()
            if done:
                yield pd.DataFrame(
                    {
                        key_col: [key[0]] * len(done),
                        "visit_start": pd.to_datetime([v["start"] for v in done], unit="us"),
                        "visit_end": pd.to_datetime([v["end"] for v in done], unit="us"),
                        "events": [v["n"] for v in done],
                        f"distinct_{label_col}": [len(set(v["labels"])) for v in done],
                        amount_col: [v["amount"] for v in done],
                    }
                )

        summarize.__name__ = f"visits_by_{key_col}"
        return summarize


def _merge_visits(visits: list[dict[str, Any]], gap_us: int) -> list[dict[str, Any]]:
    """Merge visits (and single events) whose events are less than the gap apart."""
    merged: list[dict[str, Any]] = []
    for v in sorted(visits, key=lambda v: v["start"]):
        last = merged[-1] if merged else None
        if last is not None and v["start"] < last["end"] + gap_us:
            last["end"] = max(last["end"], v["end"])
            last["n"] += v["n"]
            last["labels"] = sorted(set(last["labels"]) | set(v["labels"]))
            last["amount"] += v["amount"]
        else:
            merged.append({**v, "labels": sorted(set(v["labels"]))})
    return merged
