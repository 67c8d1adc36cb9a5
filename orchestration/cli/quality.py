"""`tributary quality report` (render the latest check results) and `tributary quality check` (run the checks).

`report` needs neither Spark nor Dagster: it reads the JSON results the checks persist under the home.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from infra.errors import TributaryError
from infra.settings import Settings


def _report(args: argparse.Namespace, settings: Settings) -> int:
    from quality.report import write_report
    from quality.results import load_results

    path = write_report(settings)
    results = load_results(settings)
    failing = [r for r in results if not r.passed]
    print(f"wrote {path} ({len(results)} check results, {len(failing)} not passing)")
    for r in failing:
        print(f"  {'FAILED ' if r.severity == 'error' else 'warning'} {r.table} {r.check}: ", end="")
        print("; ".join(o.name for o in r.failed))
    return 0


def _check(args: argparse.Namespace, settings: Settings) -> int:
    from infra.spark import get_spark
    from pipelines.datasets import default_registry
    from quality.report import report_path
    from quality.run import check_tables

    results = check_tables(get_spark(settings), settings, default_registry(), args.tables or None, args.deep)
    for r in results:
        status = "passed" if r.passed else ("FAILED" if r.severity == "error" else "warning")
        print(f"{status:<8} {r.table:<28} {r.check:<18} {len(r.failed)}/{len(r.outcomes)} failed  {r.seconds:.2f} s")
        for outcome in r.failed:
            print(f"         {outcome.summary()}")
    print(f"\nreport: {report_path(settings)}")
    return 1 if any(not r.passed and r.severity == "error" for r in results) else 0


def _quality(args: argparse.Namespace, settings: Settings) -> int:
    handler = {"report": _report, "check": _check}.get(args.quality_command)
    if handler is None:
        raise TributaryError("choose a quality command: 'tributary quality report' or 'tributary quality check'")
    return handler(args, settings)


def register(
    sub: argparse._SubParsersAction, handlers: dict[str, Callable[[argparse.Namespace, Settings], int]]
) -> None:
    """Add the `quality` command (`report`, `check`) and its handler."""
    quality = sub.add_parser("quality", help="data-quality results: the Markdown report, or run the checks now")
    actions = quality.add_subparsers(dest="quality_command", required=True)
    actions.add_parser("report", help="write <home>/reports/quality.md from the latest check results")
    check = actions.add_parser("check", help="run the expectation suites and reconciliations (exit 1 on a failure)")
    check.add_argument("tables", nargs="*", help="table names such as silver.events (default: all)")
    check.add_argument(
        "--deep", action="store_true", help="read every row again instead of what the batches recorded in their commits"
    )
    handlers["quality"] = _quality
