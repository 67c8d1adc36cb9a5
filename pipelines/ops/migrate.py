"""Move a home's tables into another catalog (`tributary catalog migrate --to URL`), keeping their data and streams.

An Iceberg table is its metadata file: the other catalog registers each table's current metadata location, so
snapshots, history and the snapshot ids the home's checkpoints hold stay valid, and no data file is copied. Delta
tables are found by path and need no registration. Every table's writer lock is held while they move, so no run
commits to the old catalog after its table was registered in the new one. The home's record names the new catalog
last: a migration stopped midway is completed by running it again (tables already registered at the same
metadata are skipped), and until then the home keeps working with its old catalog.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, replace

from pyiceberg.exceptions import NoSuchTableError

from infra.catalog import catalog_at, pyiceberg_catalog, sqlalchemy_of_jdbc
from infra.errors import ConfigError
from infra.home_record import catalog_identity, check_home, move_home, recorded
from infra.settings import Settings
from infra.sql.delta_tables import delta_tables
from pipelines.run.locks import table_lock


@dataclass(frozen=True)
class Migration:
    """What moved: Iceberg tables registered (or found registered already), Delta tables kept by path."""

    source: str
    target: str
    registered: tuple[str, ...]
    already_there: tuple[str, ...]
    delta: tuple[str, ...]

    def lines(self) -> list[str]:
        """The summary the CLI prints."""
        moved = len(self.registered) + len(self.already_there)
        lines = [f"moved {moved} Iceberg table(s) from {self.source} into {self.target}"]
        if self.already_there:
            lines.append(f"  already registered there (an earlier, interrupted migration): {len(self.already_there)}")
        if self.delta:
            lines.append(f"  {len(self.delta)} Delta table(s) stay where they are (found by path)")
        return lines


def migrate_catalog(settings: Settings, target_uri: str, target_sqlalchemy: str | None = None) -> Migration:
    """Register every table of the home's catalog in the catalog at `target_uri` (JDBC) and move the home there."""
    source = catalog_identity(settings.home, settings.catalog_uri, settings.catalog_db)
    target = catalog_identity(settings.home, target_uri, settings.catalog_db)
    if target in (source, recorded(settings.home).get("catalog")):
        raise ConfigError(f"TRIBUTARY_HOME={settings.home} already uses catalog {target}: nothing to migrate")
    check_home(settings.home, settings.table_format, source)  # a home that moved already refuses its old catalog
    moved = replace(settings, catalog_uri=target_uri)
    if not target_uri.startswith("jdbc:sqlite:") and target_sqlalchemy is None:
        target_sqlalchemy = sqlalchemy_of_jdbc(target_uri)
    sqlite_path = target_uri.removeprefix("jdbc:sqlite:").split("?", 1)[0]  # (a JDBC URL may carry options)
    into = catalog_at(moved, target_sqlalchemy or f"sqlite:///{sqlite_path}")
    catalog = pyiceberg_catalog(settings)
    names = sorted(".".join(ident) for ns in catalog.list_namespaces() for ident in catalog.list_tables(ns))
    registered, there = [], []
    with ExitStack() as held:
        for name in names:
            held.enter_context(table_lock(settings, name, settings.lock_wait_seconds))
        for name in names:
            location = catalog.load_table(name).metadata_location
            into.create_namespace_if_not_exists(name.rsplit(".", 1)[0])
            try:
                existing = into.load_table(name).metadata_location
            except NoSuchTableError:
                into.register_table(name, location)
                registered.append(name)
                continue
            if existing != location:
                raise ConfigError(
                    f"table {name} already exists in catalog {target} (catalog name {settings.catalog_name}) with "
                    "other metadata: drop it there, or migrate under another TRIBUTARY_CATALOG_NAME"
                )
            there.append(name)
        move_home(settings.home, target)
    return Migration(source, target, tuple(registered), tuple(there), tuple(sorted(delta_tables(settings))))
