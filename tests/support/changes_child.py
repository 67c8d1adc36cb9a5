"""Child process for tests of tables following a changing upstream: runs one table of a dataset package and
SIGKILLs its whole process group (with the JVM) at a point of its run.

Usage: python -m tests.support.changes_child HOME CATALOG PACKAGES PACKAGE TABLE POINT
  before  when the table's strategy is handed the upstream's changes: nothing of the run is committed
  after   after the table's commit, before its position in the upstream is recorded
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
from pathlib import Path

from infra.settings import Settings
from infra.spark import get_spark
from pipelines.authoring.load import load_registry
from pipelines.run import runner
from pipelines.sources import table_changes
from tests.support.killed_child import run_killed_child

POINTS = ("before", "after")


def _kill(*_args: object) -> None:
    os.killpg(os.getpgid(0), signal.SIGKILL)


def kill_following(settings: Settings, packages: Path, package: str, table: str, point: str) -> None:
    """Run `table` in a child process that must be SIGKILLed at `point`; fail the test if it is not."""
    arguments = (str(settings.home), settings.catalog_name, str(packages), package, table, point)
    env = {"TRIBUTARY_TABLE_FORMAT": settings.table_format}
    run_killed_child(settings, "tests.support.changes_child", *arguments, env=env)


def main() -> None:
    home, catalog, packages, package, table, point = sys.argv[1:7]
    assert point in POINTS, point
    settings = dataclasses.replace(Settings.from_env(home=home).with_home(Path(home)), catalog_name=catalog)
    sys.path.insert(0, packages)
    spec = load_registry([package]).get(table)
    if point == "before":
        type(spec.sink).follow = _kill  # type: ignore[method-assign]
    else:
        table_changes.record_changes_read = _kill  # type: ignore[assignment]
    runner.run_table(get_spark(settings), settings, spec)
    sys.exit(3)  # reaching here means the kill point was never hit


if __name__ == "__main__":
    main()
