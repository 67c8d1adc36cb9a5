"""Independent plain-Python answers for the clickstream dataset, computed from the landed files of each run.

No Spark and no project code: a run is the list of files landed before it, and everything follows from the
documented semantics (docs/streaming.md):

* the watermark a run's batch uses is max(event time seen in earlier runs) - delay (0 before any data; for a
  join, the smaller of the two streams' watermarks); a row with event time behind it is late. Spark's own
  rule is per query (a window's or session's end, a join row's time: docs/streaming.md); the stragglers of
  this data set are behind every window, session and join partner, so this one rule gives the same answer
  for every query here (tests/pipelines/run/test_late_rows.py checks the per-query rules against Spark);
* windows: tumbling [k*size, (k+1)*size), sliding every `slide`, sessions closed by a gap of inactivity;
  append mode writes a window once the final watermark reaches its end, update mode has every window;
* a click is attributed when impression_time <= click_time <= impression_time + 5 minutes;
* CDC: per customer, the distinct changes ordered by seq form the SCD2 chain; the last one is the SCD1 row.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MINUTE_MS = 60_000


def ms(value: str | datetime) -> int:
    """Epoch milliseconds of an ISO-8601 string (Z = UTC) or a datetime (naive = UTC)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - EPOCH) // timedelta(milliseconds=1)


def read_json_lines(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Every record of the given JSON-lines files, in file order."""
    return [json.loads(line) for p in paths for line in Path(p).read_text().splitlines() if line.strip()]


def read_csv(paths: Iterable[Path]) -> list[dict[str, str]]:
    """Every row of the given CSV files (with header)."""
    rows: list[dict[str, str]] = []
    for p in paths:
        with open(p, newline="") as fh:
            rows.extend(csv.DictReader(fh))
    return rows


def split_late(runs: list[list[dict]], delay_ms: int, key: str = "event_time") -> tuple[list[dict], list[dict], int]:
    """(on-time rows, late rows, final watermark) for one stream delivered in `runs`."""
    watermark, seen, on_time, late = 0, None, [], []
    for rows in runs:
        for r in rows:
            (late if ms(r[key]) < watermark else on_time).append(r)
        times = [ms(r[key]) for r in rows if ms(r[key]) >= watermark]
        if times:
            seen = max(times) if seen is None else max(seen, max(times))
            watermark = max(watermark, seen - delay_ms)
    return on_time, late, watermark


def split_late_join(
    left_runs: list[list[dict]], right_runs: list[list[dict]], delay_ms: int
) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    """Late split of two streams under one watermark: (left on-time, right on-time, left late, right late).

    After each run the watermark moves to the smaller of (newest on-time event - delay) of the streams that had
    on-time rows in that run (Spark's "min" policy; it keeps no per-stream history across restarts), never back.
    """
    watermark = 0
    out: list[list[dict]] = [[], [], [], []]
    for left, right in zip(left_runs, right_runs, strict=True):
        marks = []
        for side, rows in enumerate((left, right)):
            on_time = [r for r in rows if ms(r["event_time"]) >= watermark]
            out[side].extend(on_time)
            out[side + 2].extend(r for r in rows if ms(r["event_time"]) < watermark)
            if on_time:
                marks.append(max(ms(r["event_time"]) for r in on_time) - delay_ms)
        if marks:
            watermark = max(watermark, min(marks))
    return out[0], out[1], out[2], out[3]


def catalog_by_run(product_runs: list[list[dict]]) -> list[dict[str, str]]:
    """The category of each product as the catalog stands in each run (newest updated_at wins)."""
    current: dict[str, tuple[int, str]] = {}
    out = []
    for rows in product_runs:
        for r in rows:
            version = ms(r["updated_at"])
            if r["product_id"] not in current or version >= current[r["product_id"]][0]:
                current[r["product_id"]] = (version, r["category"])
        out.append({pid: cat for pid, (_, cat) in current.items()})
    return out


def enrich(impression_runs: list[list[dict]], catalogs: list[dict[str, str]]) -> list[list[dict]]:
    """Impressions with the category of their product in the catalog of the run that read them."""
    return [
        [{**r, "category": catalog.get(r["product_id"], "unknown")} for r in rows]
        for rows, catalog in zip(impression_runs, catalogs, strict=True)
    ]


def tumbling(rows: list[dict], size_ms: int, group: str) -> dict[tuple, tuple[int, int]]:
    """(window_start ms, window_end ms, group) -> (rows, sum of cost_cents)."""
    out: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        start = ms(r["event_time"]) // size_ms * size_ms
        cell = out[(start, start + size_ms, r[group])]
        cell[0] += 1
        cell[1] += r["cost_cents"]
    return {k: (v[0], v[1]) for k, v in out.items()}


def sliding(rows: list[dict], size_ms: int, slide_ms: int, group: str) -> dict[tuple, tuple[int, int]]:
    """Like `tumbling` for windows of `size_ms` starting every `slide_ms` (each row in every window it falls in)."""
    out: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        t = ms(r["event_time"])
        start = t // slide_ms * slide_ms
        while start > t - size_ms:
            cell = out[(start, start + size_ms, r[group])]
            cell[0] += 1
            cell[1] += r["cost_cents"]
            start -= slide_ms
    return {k: (v[0], v[1]) for k, v in out.items()}


def sessions(rows: list[dict], gap_ms: int, key: str = "user_id") -> list[dict[str, Any]]:
    """Sessions per key: consecutive events less than `gap_ms` apart; end = last event + gap."""
    by_key: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_key[r[key]].append(r)
    out = []
    for k, events in by_key.items():
        events.sort(key=lambda r: ms(r["event_time"]))
        current: list[dict] = []
        for r in events:
            if current and ms(r["event_time"]) >= ms(current[-1]["event_time"]) + gap_ms:
                out.append(_session(k, current, gap_ms))
                current = []
            current.append(r)
        if current:
            out.append(_session(k, current, gap_ms))
    return out


def _session(key: str, events: list[dict], gap_ms: int) -> dict[str, Any]:
    first, last = ms(events[0]["event_time"]), ms(events[-1]["event_time"])
    return {
        "key": key,
        "start": first,
        "last": last,
        "end": last + gap_ms,
        "events": len(events),
        "categories": len({e["category"] for e in events}),
        "cost_cents": sum(e["cost_cents"] for e in events),
    }


def attributed_clicks(impressions: list[dict], clicks: list[dict], within_ms: int) -> dict[str, tuple]:
    """click_id -> (impression_id, category, ms_to_click) for clicks within range after their impression."""
    by_id = {i["impression_id"]: i for i in impressions}
    out = {}
    for c in clicks:
        imp = by_id.get(c["impression_id"])
        if imp is None:
            continue
        delta = ms(c["event_time"]) - ms(imp["event_time"])
        if 0 <= delta <= within_ms:
            out[c["click_id"]] = (imp["impression_id"], imp["category"], delta)
    return out


def scd(changes: list[dict]) -> tuple[dict[str, tuple], list[tuple]]:
    """(SCD1: customer -> (name, email, tier, last seq), SCD2 rows (customer, seq, valid_from, valid_to,
    is_current, is_deleted, name, email, tier)) from the distinct changes, whatever their order."""
    distinct = {(c["customer_id"], c["seq"]): c for c in changes}
    chains: dict[str, list[dict]] = defaultdict(list)
    for (customer, _), c in sorted(distinct.items()):
        chains[customer].append(c)
    current, history = {}, []
    for customer, chain in chains.items():
        for i, c in enumerate(chain):
            valid_to = ms(chain[i + 1]["changed_at"]) if i + 1 < len(chain) else None
            deleted = c["op"] == "D"
            values = (None, None, None) if deleted else (c["name"], c["email"], c["tier"])
            history.append(
                (customer, c["seq"], ms(c["changed_at"]), valid_to, valid_to is None and not deleted, deleted, *values)
            )
        last = chain[-1]
        if last["op"] != "D":
            current[customer] = (last["name"], last["email"], last["tier"], last["seq"])
    return current, sorted(history)
