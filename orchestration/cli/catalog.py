"""`tributary catalog migrate --to URL`: move a home's tables into another catalog (from the laptop's SQLite
catalog to the cluster's PostgreSQL), keeping their data, history, checkpoints and ledgers."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from infra.settings import Settings


def _catalog(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines.ops.migrate import migrate_catalog

    migration = migrate_catalog(settings, args.to, os.environ.get("TRIBUTARY_CATALOG_SQLALCHEMY_URI") or None)
    print("\n".join(migration.lines()))
    print(
        f"\nTRIBUTARY_HOME={settings.home} now uses {migration.target}: run it with TRIBUTARY_CATALOG_URI set to that "
        "catalog from now on (after `source .tributary/cluster/env`, export TRIBUTARY_HOME again)"
    )
    return 0


def register(
    sub: argparse._SubParsersAction, handlers: dict[str, Callable[[argparse.Namespace, Settings], int]]
) -> None:
    """Add the `catalog migrate` command and its handler."""
    catalog = sub.add_parser("catalog", help="the home's Iceberg catalog: move its tables into another one")
    actions = catalog.add_subparsers(dest="catalog_command", required=True)
    migrate = actions.add_parser(
        "migrate",
        help="register every table of the home in another catalog (e.g. the cluster's PostgreSQL) and use it",
    )
    migrate.add_argument(
        "--to",
        required=True,
        metavar="URL",
        help="the JDBC URL of the catalog database (jdbc:postgresql://host:port/db?user=..&password=..); "
        "pyiceberg reaches it by TRIBUTARY_CATALOG_SQLALCHEMY_URI when set, else by the same address",
    )
    handlers["catalog"] = _catalog
