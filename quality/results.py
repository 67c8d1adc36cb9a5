"""Check results: what was evaluated, what failed and by how much, persisted as JSON under the platform home.

Every check run writes its latest result to `<home>/quality/results/<table>.<check>.json` (atomically), so
the quality report can be rendered without a Dagster instance.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from infra.files import write_atomically
from infra.settings import Settings

MAX_SAMPLES = 20


@dataclass
class Outcome:
    """The result of one expectation (or one reconciliation equation)."""

    name: str
    severity: str
    success: bool
    observed: str | None = None
    element_count: int | None = None
    unexpected_count: int | None = None
    unexpected_percent: float | None = None
    samples: list[Any] = field(default_factory=list)
    error: str | None = None

    def summary(self) -> str:
        """One line a person can act on."""
        parts = [f"{'ok' if self.success else 'FAILED'} [{self.severity}] {self.name}"]
        if self.unexpected_count:
            pct = f" ({self.unexpected_percent:.3g}%)" if self.unexpected_percent is not None else ""
            parts.append(f"{self.unexpected_count} unexpected{pct}")
        if self.observed is not None:
            parts.append(f"observed {self.observed}")
        if self.samples and not self.success:
            parts.append(f"e.g. {', '.join(map(str, self.samples[:5]))}")
        if self.error:
            parts.append(f"error: {self.error}")
        return "; ".join(parts)


@dataclass
class CheckResult:
    """The latest run of one check of one table."""

    table: str
    check: str
    severity: str
    checked_at: str
    seconds: float
    outcomes: list[Outcome]
    snapshot_id: str | None = None
    rows_checked: int | None = None
    engine: str = ""
    notes: list[str] = field(default_factory=list)
    # The versions of what the check read (quality.inputs): the same inputs give the same result, so a check whose
    # inputs are unchanged since this result is not run again.
    inputs: dict[str, str] = field(default_factory=dict)
    # What a later run of the check can start from instead of reading everything again (quality.pipeline_counts).
    state: dict[str, int | str | None] = field(default_factory=dict)
    # When this result was last carried over unchanged to a later run instead of re-running the check (None: fresh).
    carried_over_at: str | None = None

    @property
    def passed(self) -> bool:
        """True when every outcome succeeded."""
        return all(o.success for o in self.outcomes)

    @property
    def failed(self) -> list[Outcome]:
        """The outcomes that did not succeed."""
        return [o for o in self.outcomes if not o.success]

    def to_json(self) -> str:
        """JSON text (values that JSON cannot hold, such as timestamps and decimals, become strings)."""
        return json.dumps(asdict(self), indent=2, default=str) + "\n"

    @classmethod
    def from_json(cls, text: str) -> CheckResult:
        """Parse what `to_json` wrote."""
        raw = json.loads(text)
        raw["outcomes"] = [Outcome(**o) for o in raw["outcomes"]]
        return cls(**raw)


def plain(value: Any) -> Any:
    """A JSON- and metadata-friendly version of a sample value."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return str(value)


def results_dir(settings: Settings) -> Path:
    """Where the latest check results live."""
    return settings.home / "quality" / "results"


def save_result(settings: Settings, result: CheckResult) -> Path:
    """Write `result` as the latest of its table and check (atomic rename: readers never see half a file)."""
    target = results_dir(settings) / f"{result.table}.{result.check}.json"
    write_atomically(target, result.to_json())
    return target


def latest_result(settings: Settings, table: str, check: str) -> CheckResult | None:
    """The persisted latest result of `check` on `table`, if any (an unreadable file counts as none)."""
    path = results_dir(settings) / f"{table}.{check}.json"
    try:
        return CheckResult.from_json(path.read_text())
    except (OSError, ValueError, TypeError, KeyError):
        return None


def load_results(settings: Settings) -> list[CheckResult]:
    """Every persisted latest result, by table then check; unreadable files are skipped."""
    folder = results_dir(settings)
    if not folder.is_dir():
        return []
    results = []
    for path in sorted(folder.glob("*.json")):
        if path.name.startswith("."):
            continue
        try:
            results.append(CheckResult.from_json(path.read_text()))
        except (ValueError, TypeError, KeyError):
            continue
    return sorted(results, key=lambda r: (r.table, r.check))
