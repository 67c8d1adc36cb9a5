"""Deterministic e-commerce event generator for the demo landing zone.

The generator writes JSON-lines files that look like what a real, slightly careless producer
sends: mostly well-formed events, plus late (out-of-order) events, exact duplicate lines,
truncated or mistyped lines, and events without an id. Everything is derived from one
``random.Random(seed)`` and the arguments, never from the wall clock, so the same arguments
always produce byte-identical files.

Each file is first written under a hidden temporary name (``.events-s7-00000.json.tmp``) in the
target folder and then atomically renamed into place, so a reader that skips dot-files never
sees a partially written file.
"""

from __future__ import annotations

import json
import os
import random
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tqdm import tqdm

__all__ = ["DEFAULT_START", "EVENT_TYPES", "GenerateReport", "event_file_name", "generate"]

DEFAULT_START = datetime(2026, 11, 1, tzinfo=UTC)
EVENT_TYPES: tuple[str, ...] = ("page_view", "cart_add", "cart_remove", "order")

_EVENT_TYPE_WEIGHTS = (55, 20, 5, 20)
_CURRENCIES = ("USD", "EUR", "GBP")
_CURRENCY_WEIGHTS = (70, 20, 10)
_CATEGORIES = ("books", "electronics", "home", "garden", "toys", "clothing", "beauty", "sports")
_USERS = 2000
_PRODUCTS = 500

_DUPLICATE_RATE = 0.01
_BAD_RATE = 0.005  # truncated + wrong type + missing id, split evenly
_LATE_RATE = 0.03
_LATE_MIN_MS = 60_000
_LATE_MAX_MS = 3 * 3600 * 1000

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)

# (field, wrong-typed JSON value) pairs used for "wrong type" lines.
_WRONG_TYPES: tuple[tuple[str, str], ...] = (
    ("quantity", json.dumps("three")),
    ("amount", json.dumps("n/a")),
    ("event_time", json.dumps("yesterday")),
)


@dataclass(frozen=True)
class GenerateReport:
    """What one :func:`generate` call wrote.

    ``lines == events + duplicates + malformed + missing_ids`` always holds.
    """

    files: list[Path]
    """Files written, in order."""
    lines: int
    """Total lines written, including duplicates and malformed lines."""
    events: int
    """Distinct well-formed events with an id (before duplication)."""
    duplicates: int
    """Extra exact copies of earlier well-formed event lines."""
    late: int
    """Well-formed events whose event_time was shifted back (written out of order)."""
    malformed: int
    """Corrupt lines: truncated JSON or a field with the wrong type."""
    missing_ids: int
    """Well-formed JSON lines whose ``event_id`` is absent or null."""


@dataclass(frozen=True)
class _Product:
    product_id: str
    category: str
    unit_cents: int


def event_file_name(seed: int, index: int) -> str:
    """Return the landing file name for file number ``index`` of a run with ``seed``."""
    return f"events-s{seed}-{index:05d}.json"


def generate(
    landing_dir: Path,
    rows: int = 10_000,
    files: int = 10,
    seed: int = 7,
    start: datetime | None = None,
    days: int = 3,
    progress: bool = False,
) -> GenerateReport:
    """Write ``rows`` JSON lines spread over ``files`` files into ``landing_dir / "events"``.

    Args:
        landing_dir: Root of the landing zone; the ``events`` sub-folder is created if missing.
        rows: Total number of lines over all files (split as evenly as possible).
        files: Number of files to write.
        seed: Seed of the random generator; also part of file names and event ids.
        start: Start of the covered time range (naive values are taken as UTC).
            Defaults to 2026-11-01T00:00:00Z.
        days: Length of the covered time range; file ``i`` covers the ``i``-th slice of it.
        progress: Show a tqdm progress bar over files on stderr.

    Returns:
        A :class:`GenerateReport` describing exactly what was written.

    Raises:
        ValueError: If ``rows`` is negative, or ``files`` or ``days`` is not positive.
        FileExistsError: If any target file already exists (nothing is written then).
    """
    if rows < 0:
        raise ValueError(f"rows must be >= 0, got {rows}")
    if files < 1:
        raise ValueError(f"files must be >= 1, got {files}")
    if days < 1:
        raise ValueError(f"days must be >= 1, got {days}")

    out_dir = Path(landing_dir) / "events"
    targets = [out_dir / event_file_name(seed, i) for i in range(files)]
    for target in targets:
        if target.exists():
            raise FileExistsError(
                f"{target} already exists; refusing to overwrite landing files. "
                f"Use another --seed to generate a new batch."
            )
    out_dir.mkdir(parents=True, exist_ok=True)

    start_utc = DEFAULT_START if start is None else _as_utc(start)
    start_ms = (start_utc - _EPOCH) // _MS
    span_ms = days * 86_400_000

    rng = random.Random(seed)
    catalog = _make_catalog(rng)
    state = _RunState(rng=rng, seed=seed, catalog=catalog)

    base, extra = divmod(rows, files)
    with tqdm(total=files, desc="generate", unit="file", file=sys.stderr, disable=not progress) as bar:
        for index, target in enumerate(targets):
            n_lines = base + (1 if index < extra else 0)
            lo = start_ms + span_ms * index // files
            hi = max(start_ms + span_ms * (index + 1) // files, lo + 1)
            lines = state.file_lines(n_lines, lo, hi)
            _write_atomically(target, lines)
            bar.update(1)

    report = GenerateReport(
        files=targets,
        lines=state.lines,
        events=state.events,
        duplicates=state.duplicates,
        late=state.late,
        malformed=state.malformed,
        missing_ids=state.missing_ids,
    )
    assert report.lines == rows
    assert report.lines == report.events + report.duplicates + report.malformed + report.missing_ids
    return report


class _RunState:
    """Mutable bookkeeping for one run: the rng, the duplicate pool and the counters."""

    def __init__(self, rng: random.Random, seed: int, catalog: list[_Product]) -> None:
        self.rng = rng
        self.seed = seed
        self.catalog = catalog
        self.next_id = 0
        # Well-formed event lines written so far; lines of the current file start at file_start.
        self.pool: list[str] = []
        self.file_start = 0
        self.lines = 0
        self.events = 0
        self.duplicates = 0
        self.late = 0
        self.malformed = 0
        self.missing_ids = 0

    def file_lines(self, n_lines: int, lo_ms: int, hi_ms: int) -> list[str]:
        """Produce the lines of one file whose in-order events fall in ``[lo_ms, hi_ms)``."""
        rng = self.rng
        self.file_start = len(self.pool)
        slots = sorted(rng.randrange(lo_ms, hi_ms) for _ in range(n_lines))
        out: list[str] = []
        for slot_ms in slots:
            roll = rng.random()
            if roll < _DUPLICATE_RATE and self.pool:
                out.append(self._duplicate())
                self.duplicates += 1
            elif roll < _DUPLICATE_RATE + _BAD_RATE:
                out.append(self._bad_line(slot_ms))
            else:
                fields, late = self._event(slot_ms)
                line = _render(fields)
                self.pool.append(line)
                out.append(line)
                self.events += 1
                self.late += late
        self.lines += len(out)
        return out

    def _duplicate(self) -> str:
        """Return an exact copy of an earlier well-formed line, from this file or an earlier one."""
        rng = self.rng
        have_same = self.file_start < len(self.pool)
        have_earlier = self.file_start > 0
        if have_same and (not have_earlier or rng.random() < 0.5):
            return self.pool[rng.randrange(self.file_start, len(self.pool))]
        return self.pool[rng.randrange(0, self.file_start)]

    def _bad_line(self, slot_ms: int) -> str:
        """Return a truncated, mistyped or id-less line built from a fresh event."""
        rng = self.rng
        fields, _late = self._event(slot_ms)
        kind = rng.randrange(3)
        if kind == 0:  # truncated JSON: any proper prefix of an object is invalid JSON
            line = _render(fields)
            self.malformed += 1
            return line[: rng.randrange(1, len(line))]
        if kind == 1:  # one field with the wrong JSON type
            field, wrong = _WRONG_TYPES[rng.randrange(len(_WRONG_TYPES))]
            fields[field] = wrong
            self.malformed += 1
            return _render(fields)
        # missing id: valid JSON, but event_id is absent or null
        if rng.random() < 0.5:
            del fields["event_id"]
        else:
            fields["event_id"] = "null"
        self.missing_ids += 1
        return _render(fields)

    def _event(self, slot_ms: int) -> tuple[dict[str, str], bool]:
        """Build a fresh well-formed event as field -> JSON text, and whether it is late."""
        rng = self.rng
        event_id = f"ev-s{self.seed}-{self.next_id:09d}"
        self.next_id += 1
        late = rng.random() < _LATE_RATE
        event_ms = slot_ms - rng.randint(_LATE_MIN_MS, _LATE_MAX_MS) if late else slot_ms
        event_type = rng.choices(EVENT_TYPES, weights=_EVENT_TYPE_WEIGHTS)[0]
        user_id = f"u-{rng.randrange(_USERS):05d}"
        product = self.catalog[rng.randrange(len(self.catalog))]

        quantity = "null"
        amount = "null"
        currency = "null"
        if event_type != "page_view":
            qty = rng.randint(1, 5)
            quantity = str(qty)
            if event_type == "order":
                amount = _format_cents(product.unit_cents * qty)
                currency = json.dumps(rng.choices(_CURRENCIES, weights=_CURRENCY_WEIGHTS)[0])

        fields = {
            "event_id": json.dumps(event_id),
            "event_type": json.dumps(event_type),
            "event_time": json.dumps(_format_ms(event_ms)),
            "user_id": json.dumps(user_id),
            "product_id": json.dumps(product.product_id),
            "category": json.dumps(product.category),
            "quantity": quantity,
            "amount": amount,
            "currency": currency,
        }
        return fields, late


def _make_catalog(rng: random.Random) -> list[_Product]:
    """Products with a fixed category and unit price each."""
    return [
        _Product(
            product_id=f"p-{k:04d}",
            category=_CATEGORIES[rng.randrange(len(_CATEGORIES))],
            unit_cents=rng.randint(199, 19_999),
        )
        for k in range(_PRODUCTS)
    ]


def _render(fields: dict[str, str]) -> str:
    """Join pre-rendered JSON values into one compact JSON object line (no newline)."""
    return "{" + ",".join(f"{json.dumps(key)}:{value}" for key, value in fields.items()) + "}"


def _format_cents(cents: int) -> str:
    """Render an amount in cents as a JSON number with exactly two decimals (3750 -> 37.50)."""
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    return f"{sign}{whole}.{frac:02d}"


def _format_ms(epoch_ms: int) -> str:
    """Render epoch milliseconds as an ISO-8601 UTC string with millisecond precision."""
    moment = _EPOCH + timedelta(milliseconds=epoch_ms)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{epoch_ms % 1000:03d}Z"


def _as_utc(moment: datetime) -> datetime:
    """Interpret a naive datetime as UTC and convert an aware one to UTC."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _write_atomically(target: Path, lines: list[str]) -> None:
    """Write ``lines`` to a hidden temp file next to ``target`` and rename it into place."""
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as handle:
            for line in lines:
                handle.write(line)
                handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
