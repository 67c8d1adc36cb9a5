"""`tributary reprocess` (re-derive days of a table, and carry them downstream) and `tributary refresh` (rebuild
a table and everything downstream from scratch): the repairs the Dagster jobs run, from a shell."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import date

from infra.errors import ConfigError
from infra.settings import Settings


def _day(text: str) -> date:
    """An argparse type: a YYYY-MM-DD day."""
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a day as YYYY-MM-DD, got {text!r}") from None


def _reprocess(args: argparse.Namespace, settings: Settings) -> int:
    from infra.spark import get_spark
    from pipelines.datasets import default_registry
    from pipelines.ops.repair import reprocess_downstream

    registry = default_registry()
    registry.get(args.table)  # an unknown table fails before Spark starts
    repair = reprocess_downstream(get_spark(settings), settings, registry, args.table, args.start, args.end)
    print("\n".join(repair.lines()))
    return 0


def _refresh(args: argparse.Namespace, settings: Settings) -> int:
    from infra.spark import get_spark
    from orchestration.cli.summary import format_numbers
    from pipelines.datasets import default_registry
    from pipelines.ops.full_refresh import check_confirmation, full_refresh
    from pipelines.run.summary import report_numbers

    if args.confirm is None:
        raise ConfigError(
            f"full refresh of {args.table} deletes its data and checkpoint and those of every table downstream; "
            f"run it again with --confirm {args.table}"
        )
    check_confirmation(args.table, args.confirm)
    registry = default_registry()
    registry.get(args.table)
    reports = full_refresh(get_spark(settings), settings, registry, args.table, args.confirm)
    print(format_numbers(report_numbers(reports)))
    print(f"\nrebuilt {', '.join(spec for r in reports for spec in r.tables)} from scratch")
    return 0


def register(
    sub: argparse._SubParsersAction, handlers: dict[str, Callable[[argparse.Namespace, Settings], int]]
) -> None:
    """Add the `reprocess` and `refresh` commands and their handlers."""
    reprocess = sub.add_parser(
        "reprocess",
        help="re-derive days of a bronze or silver table from its input, then recompute those days downstream",
    )
    reprocess.add_argument("table", help="a streaming table such as silver.events")
    reprocess.add_argument("--from", dest="start", type=_day, required=True, help="first day, YYYY-MM-DD (UTC)")
    reprocess.add_argument("--to", dest="end", type=_day, required=True, help="last day, YYYY-MM-DD (inclusive)")
    handlers["reprocess"] = _reprocess

    refresh = sub.add_parser("refresh", help="DESTRUCTIVE: drop a table and everything downstream, rebuild them")
    refresh.add_argument("table", help="the table to rebuild, e.g. silver.events")
    refresh.add_argument("--confirm", metavar="TABLE", help="the table name again: its data is deleted first")
    handlers["refresh"] = _refresh
