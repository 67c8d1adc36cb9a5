"""The four textbook Structured Streaming queries, and events for them that arrive late and out of order.

Each query is a plain DataFrame function, so a test can declare it as a platform table and run the very same
function on plain Spark as the reference. Window aggregations take extra aggregate columns: the reference adds
`collect_list(event_id)` to learn which rows each window counted, which changes nothing Spark drops.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

EVENT = "event_id string, user_id string, product_id string, event_type string, amount int, event_time timestamp"
CLICK = "click_id string, event_id string, event_time timestamp"
DELAY = "1 hour"
START = datetime(2026, 3, 2, tzinfo=UTC)
DROP_SPAN = timedelta(hours=2)
DELAY_SPAN = timedelta(hours=1)
NEWEST = DROP_SPAN + timedelta(seconds=150)  # a drop's newest event, from its start: off every window edge


def watermark_before(drop: int) -> datetime:
    """The watermark the rows of drop `drop` (0-based) are judged against: the previous drop's newest - delay."""
    return START + (drop - 1) * DROP_SPAN + NEWEST - DELAY_SPAN if drop else datetime(1970, 1, 1, tzinfo=UTC)


def _flat(windowed: DataFrame, window: str) -> DataFrame:
    return windowed.select(
        F.col(f"{window}.start").alias("window_start"), F.col(f"{window}.end").alias("window_end"), "*"
    ).drop(window)


def tumbling(events: DataFrame, *extra: Column) -> DataFrame:
    """Events and amount per event type in 5-minute tumbling windows."""
    counts = events.groupBy(F.window("event_time", "5 minutes"), "event_type").agg(
        F.count(F.lit(1)).alias("events"), F.sum("amount").alias("amount"), *extra
    )
    return _flat(counts, "window")


def sliding(events: DataFrame, *extra: Column) -> DataFrame:
    """Average amount per product in 10-minute windows starting every 5 minutes."""
    averages = events.groupBy(F.window("event_time", "10 minutes", "5 minutes"), "product_id").agg(
        F.count(F.lit(1)).alias("events"), F.avg("amount").alias("avg_amount"), *extra
    )
    return _flat(averages, "window")


def sessions(events: DataFrame, *extra: Column) -> DataFrame:
    """Per-user sessions closed by 30 minutes without an event."""
    visits = events.groupBy(F.session_window("event_time", "30 minutes"), "user_id").agg(
        F.count(F.lit(1)).alias("events"), F.sum("amount").alias("amount"), *extra
    )
    return _flat(visits, "session_window")


def attributed(events: DataFrame, clicks: DataFrame) -> DataFrame:
    """Clicks joined to the event they clicked, when they come within 5 minutes after it."""
    shown = events.select(F.col("event_id").alias("shown_id"), "user_id", F.col("event_time").alias("shown_at"))
    clicked = clicks.select("click_id", "event_id", F.col("event_time").alias("clicked_at"))
    match = F.expr("shown_id = event_id AND clicked_at >= shown_at AND clicked_at <= shown_at + INTERVAL 5 MINUTES")
    return shown.join(clicked, match).select("click_id", "event_id", "user_id", "shown_at", "clicked_at")


@dataclass
class Drop:
    """The events and clicks of one drop, as JSON-ready dicts."""

    events: list[dict]
    clicks: list[dict]


def iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def make_drops(events_per_drop: int = 1000, seed: int = 18) -> list[Drop]:
    """Three drops of two hours of events each: ~5 % out of order, ~1 % late (behind the watermark).

    Every drop's newest event is 150 s after the end of its two hours, so the watermark after it is known
    exactly (`watermark_before`) and lies inside a window. Drops 2 and 3 also carry rows placed on the
    watermark's edges: at it, one window or one session gap behind it, and a millisecond either side.
    """
    rng = random.Random(seed)
    drops: list[Drop] = []
    serial = 0
    for k in range(3):
        start = START + k * DROP_SPAN
        watermark = watermark_before(k)
        times = sorted(start + DROP_SPAN * rng.random() for _ in range(events_per_drop - 1))
        times.append(start + NEWEST)
        for i in range(len(times) - 1):
            if rng.random() < 0.05:  # out of order, within the delay
                times[i] -= timedelta(minutes=rng.uniform(1, 30))
        if k:
            late = [watermark - timedelta(minutes=rng.uniform(0, 45)) for _ in range(events_per_drop // 100)]
            edges = [timedelta(minutes=m) for m in (0, 1, 3, 5, 10, 29, 30, 31)]
            tiny = timedelta(milliseconds=1)
            times += late + [watermark - e for e in edges] + [watermark - e - tiny for e in edges]
            times += [watermark + tiny]
        events = []
        for t in times:
            serial += 1
            events.append(
                {
                    "event_id": f"e{serial:05d}",
                    "user_id": f"u{rng.randrange(25):02d}",
                    "product_id": f"p{rng.randrange(12):02d}",
                    "event_type": rng.choice(("view", "view", "cart", "buy")),
                    "amount": rng.randrange(1, 500),
                    "event_time": iso(t),
                }
            )
        drops.append(Drop(events, _clicks(rng, events, watermark if k else None)))
    # Far ahead of everything: after the last drop every window and session but this event's is closed.
    drops[-1].events.append(
        {
            "event_id": "e-closer",
            "user_id": "u-closer",
            "product_id": "p-closer",
            "event_type": "view",
            "amount": 1,
            "event_time": iso(START + 3 * DROP_SPAN + timedelta(hours=4)),
        }
    )
    return drops


def _clicks(rng: random.Random, events: list[dict], watermark: datetime | None) -> list[dict]:
    """About one click per five events, 0-7 minutes after it (some outside the 5-minute match range)."""
    clicks = []
    for event in events:
        if rng.random() >= 0.2:
            continue
        shown = datetime.fromisoformat(event["event_time"].replace("Z", "+00:00"))
        clicks.append({"event_id": event["event_id"], "at": shown + timedelta(seconds=rng.uniform(0, 420))})
    newest = max(events, key=lambda e: e["event_time"])  # keeps the clicks' watermark at least the events'
    clicks.append({"event_id": newest["event_id"], "at": datetime.fromisoformat(newest["event_time"][:-1] + "+00:00")})
    if watermark is not None:  # a click exactly at the watermark, which a join drops
        clicks.append({"event_id": events[0]["event_id"], "at": watermark})
    return [
        {"click_id": f"c-{c['event_id']}-{i}", "event_id": c["event_id"], "event_time": iso(c["at"])}
        for i, c in enumerate(clicks)
    ]


def write_drop(landing: Path, index: int, drop: Drop) -> None:
    """Land one drop as JSON-lines files under `landing/events` and `landing/clicks`."""
    for folder, rows in (("events", drop.events), ("clicks", drop.clicks)):
        target = landing / folder
        target.mkdir(parents=True, exist_ok=True)
        (target / f"{folder}-{index}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
