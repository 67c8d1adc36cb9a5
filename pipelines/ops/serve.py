"""Served tables: the registry's tables declared `serve` (by default every gold table), synced into PostgreSQL.

The sync itself is `infra.serving.sync`; this module picks the tables and hands each its keys and description.
"""

from __future__ import annotations

from infra.errors import ConfigError
from infra.serving.config import ServeSettings
from infra.serving.server import running
from infra.serving.sync import SyncReport, sync_table
from infra.settings import Settings
from pipelines.spec.registry import Registry
from pipelines.spec.tables import TableSpec


def served_specs(registry: Registry, tables: list[str] | None = None) -> list[TableSpec]:
    """The specs whose table is served, in registry order (among `tables` when given)."""
    return [s for s in registry if s.serve and (tables is None or s.name in tables)]


def sync_spec(settings: Settings, serve: ServeSettings, spec: TableSpec, refresh: bool = False) -> SyncReport | None:
    """Sync one served table (None when nothing serves tables), if its lakehouse table exists."""
    from infra.sql.catalog import CatalogReader

    try:
        exists = spec.name in CatalogReader(settings).table_locations()
    except ConfigError:  # no catalog yet: nothing has run in this home
        exists = False
    if not exists:
        return None
    return sync_table(settings, serve, spec.name, spec.keys, spec.description or None, refresh=refresh)


def sync_served(
    settings: Settings, registry: Registry, tables: list[str] | None = None, serve: ServeSettings | None = None
) -> list[SyncReport]:
    """Sync every served table (among `tables`); empty when nothing serves tables."""
    serve = serve or ServeSettings.from_env()
    if not serve.url and not running(settings.home):
        return []  # nothing serves tables: the home's server is not running
    return [r for spec in served_specs(registry, tables) if (r := sync_spec(settings, serve, spec)) is not None]


def report_line(report: SyncReport) -> str:
    """One line for the terminal."""
    if not report.changed:
        return f"served {report.table}: snapshot {report.snapshot} already synced ({report.rows} rows)"
    change = f"+{report.inserted} ~{report.updated} -{report.deleted}"
    return (
        f"served {report.table}: snapshot {report.snapshot}, {report.rows} rows ({report.mode}: {change}) "
        f"in {report.seconds:.2f} s"
    )
