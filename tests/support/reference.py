"""Independent plain-Python reference for the demo event pipeline.

Tests use this module to compute, without Spark and without importing any project code, what
the pipeline should produce from a landing folder: how many lines are corrupt, invalid, valid
or duplicate, the daily revenue per (date, category, currency), and the event counts per
5-minute window and event type.

Classification of one line, in this order:

1. **corrupt**: the line is not a JSON object, or a present, non-null field has the wrong type:
   ``event_time`` is not a string holding a parseable ISO-8601 timestamp, ``quantity`` is not an
   integer, or ``amount`` is not a number (booleans count as neither).
2. **invalid**: well-formed, but breaks a rule: ``event_id`` missing, null, empty or not a
   string;
   ``user_id`` missing or null; ``event_type`` not one of the four known types; ``event_time``
   missing or null; and for orders: ``quantity`` null or <= 0, ``amount`` null or < 0,
   ``currency`` not one of USD/EUR/GBP.
3. **duplicate**: valid, but its ``event_id`` was already seen on an earlier valid line.
4. otherwise a **valid event** (first occurrence wins).

Timestamps without an offset are taken as UTC; all datetimes returned are timezone-aware UTC.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

EVENT_TYPES = frozenset({"page_view", "cart_add", "cart_remove", "order"})
CURRENCIES = frozenset({"USD", "EUR", "GBP"})
WINDOW_SECONDS = 300

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class ReferenceResult:
    """Outcome of :func:`classify`.

    ``valid_events`` maps event_id to the parsed event: a dict with the JSON fields, where
    ``event_time`` is a timezone-aware UTC datetime and ``amount`` (when present) a ``Decimal``.
    """

    landed: int = 0
    corrupt: int = 0
    invalid: int = 0
    duplicates: int = 0
    valid_events: dict[str, dict[str, Any]] = field(default_factory=dict)

    def daily_revenue(self) -> dict[tuple[date, str, str], tuple[int, int, Decimal]]:
        """Map (UTC date, category, currency) -> (orders, units, revenue) over distinct valid orders."""
        totals: dict[tuple[date, str, str], tuple[int, int, Decimal]] = {}
        for event in self.valid_events.values():
            if event.get("event_type") != "order":
                continue
            key = (event["event_time"].date(), event.get("category"), event["currency"])
            orders, units, revenue = totals.get(key, (0, 0, Decimal(0)))
            totals[key] = (orders + 1, units + event["quantity"], revenue + event["amount"])
        return totals

    def event_counts_5m(self) -> dict[tuple[datetime, str], int]:
        """Map (UTC start of the 5-minute window, event_type) -> number of distinct valid events."""
        counts: dict[tuple[datetime, str], int] = {}
        for event in self.valid_events.values():
            seconds = (event["event_time"] - _EPOCH) // timedelta(seconds=1)
            window = _EPOCH + timedelta(seconds=seconds - seconds % WINDOW_SECONDS)
            key = (window, event["event_type"])
            counts[key] = counts.get(key, 0) + 1
        return counts


def load_landing(landing_dir: Path) -> list[tuple[str, str]]:
    """Return (file_name, line) for every line of every non-hidden ``*.json`` file in ``events/``.

    Files are taken in file-name order and lines in file order. Line terminators are stripped;
    blank lines are skipped (as Spark's JSON reader does).
    """
    events_dir = Path(landing_dir) / "events"
    if not events_dir.is_dir():
        return []
    names = sorted(
        p.name for p in events_dir.iterdir() if p.is_file() and p.suffix == ".json" and not p.name.startswith(".")
    )
    result: list[tuple[str, str]] = []
    for name in names:
        text = (events_dir / name).read_bytes().decode("utf-8", errors="replace")
        for raw in text.split("\n"):
            line = raw.removesuffix("\r")
            if line.strip():
                result.append((name, line))
    return result


def classify(lines: Iterable[tuple[str, str] | str]) -> ReferenceResult:
    """Classify landed lines (as from :func:`load_landing`, or bare strings) in the given order."""
    result = ReferenceResult()
    for item in lines:
        line = item if isinstance(item, str) else item[1]
        result.landed += 1
        event = _parse(line)
        if event is None:
            result.corrupt += 1
        elif not _is_valid(event):
            result.invalid += 1
        elif event["event_id"] in result.valid_events:
            result.duplicates += 1
        else:
            result.valid_events[event["event_id"]] = event
    assert result.landed == result.corrupt + result.invalid + len(result.valid_events) + result.duplicates
    return result


def _parse(line: str) -> dict[str, Any] | None:
    """Parse one line into an event dict, or return None if the line is corrupt."""
    try:
        obj = json.loads(line, parse_float=Decimal, parse_constant=_reject_constant)
    except ValueError:  # JSONDecodeError and the non-finite constants
        return None
    if not isinstance(obj, dict):
        return None

    event_time = obj.get("event_time")
    if event_time is not None:
        parsed_time = _parse_timestamp(event_time)
        if parsed_time is None:
            return None
        obj["event_time"] = parsed_time

    quantity = obj.get("quantity")
    if quantity is not None and (isinstance(quantity, bool) or not isinstance(quantity, int)):
        return None

    amount = obj.get("amount")
    if amount is not None:
        if isinstance(amount, bool) or not isinstance(amount, int | Decimal):
            return None
        obj["amount"] = Decimal(amount)
    return obj


def _reject_constant(name: str) -> Any:
    """Refuse NaN / Infinity, which are not JSON."""
    raise ValueError(f"non-standard JSON constant {name}")


def _parse_timestamp(value: object) -> datetime | None:
    """Parse an ISO-8601 timestamp string into an aware UTC datetime, or None."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _is_valid(event: dict[str, Any]) -> bool:
    """Apply the business rules to a well-formed event."""
    event_id = event.get("event_id")
    if not isinstance(event_id, str) or event_id == "":
        return False
    if event.get("user_id") is None:
        return False
    event_type = event.get("event_type")
    if not isinstance(event_type, str) or event_type not in EVENT_TYPES:
        return False
    if event.get("event_time") is None:
        return False
    if event["event_type"] == "order":
        quantity = event.get("quantity")
        if quantity is None or quantity <= 0:
            return False
        amount = event.get("amount")
        if amount is None or amount < 0:
            return False
        currency = event.get("currency")
        if not isinstance(currency, str) or currency not in CURRENCIES:
            return False
    return True
