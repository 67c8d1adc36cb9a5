"""`tributary serve start|stop|status|sync|refresh`: served tables in a PostgreSQL every SQL client speaks."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from infra.errors import TributaryError
from infra.settings import Settings


def _sync_all(settings: Settings, tables: list[str] | None = None) -> None:
    from pipelines.datasets import default_registry
    from pipelines.ops.serve import report_line, sync_served

    registry = default_registry()
    unknown = [t for t in tables or [] if t not in {s.name for s in registry if s.serve}]
    if unknown:
        served = ", ".join(s.name for s in registry if s.serve) or "none"
        raise TributaryError(f"{unknown[0]} is not a served table (served: {served}); declare it with serve=True")
    for report in sync_served(settings, registry, tables):
        print(report_line(report))


def _start(args: argparse.Namespace, settings: Settings) -> int:
    from infra.serving import server
    from infra.serving.config import ServeSettings

    serve = ServeSettings.from_env()
    found = server.start(settings.home, serve)
    print(f"ok  PostgreSQL on {found.host}:{found.port}, database {found.database}, analysts log in as {found.analyst}")
    _sync_all(settings)
    psql = f"psql -h {found.host} -p {found.port} -U {found.analyst} {found.database}"
    print(f"query it: {psql}   stop it: tributary serve stop")
    return 0


def _stop(args: argparse.Namespace, settings: Settings) -> int:
    from infra.serving import server

    print("stopped the serving server" if server.stop(settings.home) else "the serving server was not running")
    return 0


def _status(args: argparse.Namespace, settings: Settings) -> int:
    from infra.serving import server
    from infra.serving.config import ServeSettings
    from orchestration.cli.sql import format_result
    from orchestration.cli.tables import served_rows

    serve = ServeSettings.from_env()
    found = server.endpoint(settings.home)
    if serve.url:
        print("publishing into TRIBUTARY_SERVE_URL")
    elif found is None or not server.running(settings.home):
        print("the serving server is not running: tributary serve start")
        return 1
    else:
        print(f"running on {found.host}:{found.port}, database {found.database}, analysts: {found.analyst}")
    columns = ("table", "served_snapshot", "rows", "synced_at", "lag", "state")
    print(format_result(columns, served_rows(settings), "table"), end="")
    return 0


def _sync(args: argparse.Namespace, settings: Settings) -> int:
    _sync_all(settings, args.tables or None)
    return 0


def _refresh(args: argparse.Namespace, settings: Settings) -> int:
    from infra.serving.config import ServeSettings
    from pipelines.datasets import default_registry
    from pipelines.ops.serve import report_line, served_specs, sync_spec

    specs = served_specs(default_registry(), [args.table])
    if not specs:
        raise TributaryError(f"{args.table} is not a served table; declare it with serve=True")
    report = sync_spec(settings, ServeSettings.from_env(), specs[0], refresh=True)
    if report is None:
        raise TributaryError("nothing serves tables: start the serving server first (tributary serve start)")
    print(report_line(report))
    return 0


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    handler = {"start": _start, "stop": _stop, "status": _status, "sync": _sync, "refresh": _refresh}
    return handler[args.serve_command](args, settings)


def register(
    sub: argparse._SubParsersAction, handlers: dict[str, Callable[[argparse.Namespace, Settings], int]]
) -> None:
    """Add the `serve` command and its handler."""
    serve = sub.add_parser("serve", help="serve gold tables in PostgreSQL for every SQL client (docs/analysts.md)")
    actions = serve.add_subparsers(dest="serve_command", required=True)
    actions.add_parser("start", help="start the home's PostgreSQL on 127.0.0.1 (TRIBUTARY_PG_PORT) and sync")
    actions.add_parser("stop", help="stop it")
    actions.add_parser("status", help="where it listens and each served table's snapshot and lag")
    sync = actions.add_parser("sync", help="sync served tables now (also done by every run)")
    sync.add_argument("tables", nargs="*", help="served tables (default: all)")
    refresh = actions.add_parser("refresh", help="rebuild one served table from its current snapshot")
    refresh.add_argument("table")
    handlers["serve"] = _serve
