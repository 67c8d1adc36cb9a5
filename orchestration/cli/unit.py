"""`tributary test [TABLE ...]`: the unit tests of the tables' functions (`tb.test`), on one Spark session."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from infra.errors import ConfigError
from infra.settings import Settings


def _test(args: argparse.Namespace, settings: Settings) -> int:
    from infra.spark import get_spark
    from pipelines.authoring.unit_tests import run_test, tests_of
    from pipelines.datasets import dataset_modules, default_registry

    registry = default_registry()
    tests = tests_of(dataset_modules())
    unknown = sorted(set(args.tables) - {spec.name for spec in registry})
    if unknown:
        raise ConfigError(f"no table {', '.join(unknown)} is declared; `tributary tables` lists them")
    if args.tables:
        tests = [t for t in tests if t.table in args.tables]
    if not tests:
        print("no unit tests declared" + (f" for {', '.join(args.tables)}" if args.tables else "") + " (tb.test)")
        return 0
    spark = get_spark(settings)
    failed = 0
    for t in tests:
        outcome = run_test(spark, t, registry)
        print(f"{'ok  ' if outcome.passed else 'FAIL'} {t.table}: {t.name}")
        for line in outcome.lines:
            print(line)
        failed += not outcome.passed
    print(f"{len(tests) - failed} passed, {failed} failed")
    return 1 if failed else 0


def register(
    sub: argparse._SubParsersAction, handlers: dict[str, Callable[[argparse.Namespace, Settings], int]]
) -> None:
    """Add the `test` command and its handler."""
    test = sub.add_parser("test", help="run the unit tests of the tables' functions (tb.test)")
    test.add_argument("tables", nargs="*", help="only the tests of these tables, e.g. silver.events")
    handlers["test"] = _test
