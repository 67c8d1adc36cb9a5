"""Deterministic generator of the clickstream demo: ad impressions, clicks, a product catalog and a CDC feed.

Everything derives from one ``random.Random(seed)`` and the arguments, never from the wall clock. Records are
built in memory first (`make_clickstream`), so tests can land any subset in any order; `generate_clickstream`
lands a complete demo set. Files are written under a hidden temporary name and renamed into place.

* ``impressions/*.json``: users browse in visits (bursts of impressions separated by long pauses); event
  times are slightly out of order (up to `jitter_seconds`).
* ``clicks/*.json``: about a quarter of impressions get a click 1 s to 7 min later (so some fall outside a
  5-minute attribution range), plus a few clicks for impressions that never existed.
* ``products/*.csv``: the catalog (product_id, name, category, price, updated_at); `product_updates` holds a
  later version of some rows (new category and price).
* ``customer_changes/*.json``: insert / update / delete changes with a global sequence number ``seq``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = [
    "CATEGORIES",
    "DEFAULT_START",
    "LANDING_FOLDERS",
    "Clickstream",
    "ClickstreamReport",
    "ensure_landing_folders",
    "generate_clickstream",
    "make_clickstream",
    "write_json_lines",
    "write_products_csv",
]

DEFAULT_START = datetime(2026, 11, 1, tzinfo=UTC)
LANDING_FOLDERS = ("impressions", "clicks", "products", "customer_changes")
CATEGORIES = ("books", "electronics", "home", "garden", "toys", "sports")
TIERS = ("free", "silver", "gold")
PRODUCT_FIELDS = ("product_id", "name", "category", "price", "updated_at")


@dataclass(frozen=True)
class Clickstream:
    """Generated records, JSON-ready (times are ISO-8601 strings in UTC with milliseconds)."""

    impressions: list[dict[str, Any]]
    clicks: list[dict[str, Any]]
    products: list[dict[str, Any]]
    product_updates: list[dict[str, Any]]
    changes: list[dict[str, Any]]


@dataclass(frozen=True)
class ClickstreamReport:
    """What `generate_clickstream` wrote."""

    files: list[Path]
    impressions: int
    clicks: int
    products: int
    changes: int


def _iso(ms: int) -> str:
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _ms(moment: datetime) -> int:
    return int((moment - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(milliseconds=1))


def make_clickstream(
    impressions: int,
    seed: int = 7,
    start: datetime = DEFAULT_START,
    hours: float = 6.0,
    users: int = 60,
    products: int = 40,
    customers: int = 50,
    jitter_seconds: int = 90,
) -> Clickstream:
    """Build `impressions` impressions over `hours`, their clicks, the catalog and `customers` CDC chains."""
    if impressions < 0 or users < 1 or products < 1 or customers < 0 or hours <= 0:
        raise ValueError("impressions and customers must be >= 0; users, products and hours must be positive")
    rng = random.Random(seed)
    start_ms = _ms(start)
    span_ms = int(hours * 3_600_000)
    catalog = [
        {
            "product_id": f"p{i:03d}",
            "name": f"product {i}",
            "category": CATEGORIES[i % len(CATEGORIES)],
            "price": f"{rng.randint(100, 9999) / 100:.2f}",
            "updated_at": _iso(start_ms - 86_400_000),
        }
        for i in range(products)
    ]
    updates = [
        {
            **row,
            "category": CATEGORIES[(CATEGORIES.index(row["category"]) + 1) % len(CATEGORIES)],
            "price": f"{float(row['price']) + 1:.2f}",
            "updated_at": _iso(start_ms + span_ms),
        }
        for row in rng.sample(catalog, max(1, products // 8))
    ]

    times = _visit_times(rng, impressions, users, start_ms, span_ms)
    imps: list[dict[str, Any]] = []
    clicks: list[dict[str, Any]] = []
    for i, (t, user) in enumerate(times):
        shown = t + rng.randint(-jitter_seconds * 1000, 0)  # written in arrival order, timed slightly earlier
        imp = {
            "impression_id": f"im-{seed}-{i:07d}",
            "user_id": f"u{user:04d}",
            "product_id": f"p{rng.randrange(products):03d}",
            "cost_cents": rng.randint(1, 50),
            "event_time": _iso(shown),
        }
        imps.append(imp)
        roll = rng.random()
        if roll < 0.25:
            clicks.append(
                _click(seed, len(clicks), imp["impression_id"], imp["user_id"], shown + rng.randint(1000, 420_000))
            )
        elif roll < 0.26:
            clicks.append(_click(seed, len(clicks), f"im-{seed}-missing-{i}", imp["user_id"], shown + 1000))
    clicks.sort(key=lambda c: c["event_time"])
    return Clickstream(imps, clicks, catalog, updates, _changes(rng, customers, start_ms, span_ms))


def _click(seed: int, n: int, impression_id: str, user_id: str, ms: int) -> dict[str, Any]:
    return {
        "click_id": f"cl-{seed}-{n:07d}",
        "impression_id": impression_id,
        "user_id": user_id,
        "event_time": _iso(ms),
    }


def _visit_times(rng: random.Random, n: int, users: int, start_ms: int, span_ms: int) -> list[tuple[int, int]]:
    """`n` (time ms, user) pairs in time order: each user's events come in visits of a few minutes."""
    events: list[tuple[int, int]] = []
    while len(events) < n:
        user = rng.randrange(users)
        t = start_ms + rng.randrange(span_ms)
        for _ in range(rng.randint(1, 12)):
            events.append((t, user))
            t += rng.randint(5_000, 240_000)
    events = events[:n]
    events.sort()
    return events


def _changes(rng: random.Random, customers: int, start_ms: int, span_ms: int) -> list[dict[str, Any]]:
    """CDC chains: insert, some updates, maybe a delete and a re-insert; `seq` follows time globally."""
    raw: list[tuple[int, str, str]] = []
    for c in range(customers):
        cid = f"c{c:04d}"
        t = start_ms + rng.randrange(span_ms // 2)
        ops = ["I"] + ["U"] * rng.randint(0, 4)
        if rng.random() < 0.25:
            ops.append("D")
            if rng.random() < 0.5:
                ops.append("I")
        for op in ops:
            raw.append((t, cid, op))
            t += rng.randint(60_000, 1_800_000)
    raw.sort()
    changes = []
    for seq, (t, cid, op) in enumerate(raw, start=1):
        changes.append(
            {
                "customer_id": cid,
                "op": op,
                "seq": seq,
                "name": None if op == "D" else f"name {cid} v{seq}",
                "email": None if op == "D" else f"{cid}.{seq}@example.com",
                "tier": None if op == "D" else rng.choice(TIERS),
                "changed_at": _iso(t),
            }
        )
    return changes


def _write_atomically(target: Path, text: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        raise FileExistsError(f"{target} already exists; refusing to overwrite landing files (use another seed)")
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, target)


def write_json_lines(folder: Path, name: str, records: Iterable[dict[str, Any]]) -> Path:
    """Land `records` as one JSON-lines file `folder/name` (atomically); returns its path."""
    target = Path(folder) / name
    _write_atomically(target, "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return target


def write_products_csv(folder: Path, name: str, rows: Sequence[dict[str, Any]]) -> Path:
    """Land catalog rows as one CSV file with a header (atomically); returns its path."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=PRODUCT_FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    target = Path(folder) / name
    _write_atomically(target, buffer.getvalue())
    return target


def ensure_landing_folders(landing: Path) -> None:
    """Create the dataset's (empty) landing folders, so its tables run with nothing to read."""
    for folder in LANDING_FOLDERS:
        (Path(landing) / folder).mkdir(parents=True, exist_ok=True)


def _chunks(records: list[dict[str, Any]], files: int) -> list[list[dict[str, Any]]]:
    base, extra = divmod(len(records), files)
    out, at = [], 0
    for i in range(files):
        size = base + (1 if i < extra else 0)
        out.append(records[at : at + size])
        at += size
    return out


def generate_clickstream(
    landing: Path,
    impressions: int = 20_000,
    files: int = 4,
    seed: int = 7,
    start: datetime = DEFAULT_START,
    hours: float = 6.0,
    users: int = 60,
) -> ClickstreamReport:
    """Land a complete demo set: impressions and clicks in `files` files each (in time order), the catalog,
    and the change feed in `files` files (shuffled, so changes arrive out of order)."""
    if files < 1:
        raise ValueError(f"files must be >= 1, got {files}")
    data = make_clickstream(impressions, seed=seed, start=start, hours=hours, users=users)
    landing = Path(landing)
    ensure_landing_folders(landing)
    written = [write_products_csv(landing / "products", f"products-s{seed}-v1.csv", data.products)]
    for i, chunk in enumerate(_chunks(data.impressions, files)):
        written.append(write_json_lines(landing / "impressions", f"impressions-s{seed}-{i:05d}.json", chunk))
    for i, chunk in enumerate(_chunks(data.clicks, files)):
        written.append(write_json_lines(landing / "clicks", f"clicks-s{seed}-{i:05d}.json", chunk))
    changes = list(data.changes)
    random.Random(seed).shuffle(changes)
    for i, chunk in enumerate(_chunks(changes, files)):
        written.append(write_json_lines(landing / "customer_changes", f"changes-s{seed}-{i:05d}.json", chunk))
    return ClickstreamReport(written, len(data.impressions), len(data.clicks), len(data.products), len(changes))
