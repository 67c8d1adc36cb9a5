"""`tributary tables`: every declared table with what it is, what it reads, and how current it is, without a JVM.

Rows and commit times come from the catalog's metadata (`infra.sql.catalog.CatalogReader`, Delta logs via
delta-rs); freshness from the latest persisted check results (`quality.results`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime

from infra.errors import ConfigError
from infra.settings import Settings

COLUMNS = ("table", "layer", "write", "reads", "rows", "snapshot", "last_commit", "age", "freshness", "served")


def age(since: datetime, now: datetime) -> str:
    """A short duration such as `42s`, `7m`, `3h` or `2d`."""
    seconds = max(0, int((now - since).total_seconds()))
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _freshness(spec, results: dict[str, list]) -> str:
    """`fresh` or `stale` from the latest check of the table's freshness expectations; `unchecked` when they have
    not run; `-` when the table declares none."""
    labels = {e.label for e in spec.expectations if e.kind == "fresh"}
    if not labels:
        return "-"
    outcomes = [o for r in results.get(spec.name, []) for o in r.outcomes if o.name in labels]
    if not outcomes:
        return "unchecked"
    return "fresh" if all(o.success for o in outcomes) else "stale"


def table_rows(settings: Settings, registry, now: datetime | None = None) -> list[tuple]:
    """One row per declared table (companions after their table), in registry order, as `COLUMNS`."""
    from infra.sql.catalog import CatalogReader
    from quality.results import load_results

    now = now or datetime.now(UTC)
    reader = CatalogReader(settings)
    try:
        locations = reader.table_locations()
    except ConfigError:  # nothing has run in this home yet
        locations = {}
    results: dict[str, list] = {}
    for result in load_results(settings):
        results.setdefault(result.table, []).append(result)
    served = _served_states(settings)
    rows = []
    for spec in registry:
        reads = "; ".join(
            flow.source.describe() + ("" if flow.name == "main" else f" (flow {flow.name})")
            for flow in spec.all_flows()
        )
        for out in spec.outputs():
            main = out is spec.output
            write = spec.sink.label if main else f"with {spec.name}"
            current = reader.metadata(out.name, locations).current if out.name in locations else None
            rows.append(
                (
                    out.name,
                    spec.layer,
                    write,
                    reads if main else "-",
                    current.count("total-records") if current else None,
                    current.snapshot_id if current else None,
                    current.committed_at.replace(microsecond=0).isoformat() if current else None,
                    age(current.committed_at, now) if current else "never run",
                    _freshness(spec, results) if main else "-",
                    _served(spec, served, current) if main else "-",
                )
            )
    return rows


def _served_states(settings: Settings) -> dict | None:
    from infra.serving.config import ServeSettings
    from infra.serving.sync import synced_state

    return synced_state(settings, ServeSettings.from_env())


def _served(spec, served: dict | None, current) -> str:
    """`in sync` or `behind` (the served copy's snapshot against the lakehouse's), `not synced`, `off` when
    nothing serves tables, `-` for a table that is not served."""
    if not spec.serve:
        return "-"
    if served is None:
        return "off"
    if spec.name not in served:
        return "not synced"
    snapshot = str(current.snapshot_id) if current else "empty"
    return "in sync" if served[spec.name][1] == snapshot else "behind"


def served_rows(settings: Settings, now: datetime | None = None) -> list[tuple]:
    """One row per synced table: (table, served snapshot, rows, synced at, lag behind the lakehouse's last
    commit, in sync or behind)."""
    from infra.sql.catalog import CatalogReader

    now = now or datetime.now(UTC)
    reader = CatalogReader(settings)
    locations = reader.table_locations()
    rows = []
    for name, (_, snapshot, count, synced_at) in sorted((_served_states(settings) or {}).items()):
        current = reader.metadata(name, locations).current if name in locations else None
        latest = str(current.snapshot_id) if current else "empty"
        state = "in sync" if latest == snapshot else "behind"
        lag = "0s" if state == "in sync" or current is None else age(current.committed_at, now)
        rows.append((name, snapshot, count, synced_at.replace(microsecond=0).isoformat(), lag, state))
    return rows


def _tables(args: argparse.Namespace, settings: Settings) -> int:
    from orchestration.cli.sql import format_result
    from pipelines.datasets import default_registry

    sys.stdout.write(format_result(COLUMNS, table_rows(settings, default_registry()), args.format))
    return 0


def register(
    sub: argparse._SubParsersAction, handlers: dict[str, Callable[[argparse.Namespace, Settings], int]]
) -> None:
    """Add the `tables` command and its handler."""
    from orchestration.cli.sql import FORMATS

    tables = sub.add_parser(
        "tables", help="list every declared table: layer, write kind, what it reads, rows, last commit, freshness"
    )
    tables.add_argument("--format", choices=FORMATS, default="table")
    handlers["tables"] = _tables
