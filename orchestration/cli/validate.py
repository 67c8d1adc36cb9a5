"""`tributary validate`: a dry run of every dataset, one line per problem, exit 1 on any (nothing is written).

Its Spark session plans only, in a throw-away home: the real home, catalog and warehouse are not touched.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path

from infra.settings import Settings


def _validate(args: argparse.Namespace, settings: Settings) -> int:
    from infra.spark import get_spark
    from pipelines.authoring.load import check_datasets
    from pipelines.authoring.schemas import planning_settings, uncached
    from pipelines.datasets import dataset_modules

    modules = dataset_modules()
    with tempfile.TemporaryDirectory(prefix="tributary-validate-", ignore_cleanup_errors=True) as scratch:
        get_spark(planning_settings(settings, Path(scratch)))
        with uncached():
            result = check_datasets(modules)
    for line in result.problems:
        print(line)
    unchecked = f", {len(result.unchecked)} not checked (they read a table with a problem)" if result.unchecked else ""
    problems = f"{len(result.problems)} problem{'s' if len(result.problems) != 1 else ''}"
    print(f"{'FAILED' if result.problems else 'ok'}: {len(result.registry)} tables planned, {problems}{unchecked}")
    return 1 if result.problems else 0


def register(
    sub: argparse._SubParsersAction, handlers: dict[str, Callable[[argparse.Namespace, Settings], int]]
) -> None:
    """Add the `validate` command and its handler."""
    sub.add_parser(
        "validate",
        help="load every dataset and plan every table without running anything (exit 1 on any problem)",
    )
    handlers["validate"] = _validate
