"""Child process for kill tests of a table fed by several flows: runs TABLE of the dataset package PACKAGE (under
ROOT) and SIGKILLs its process group (with the JVM) right after the run's N-th table commit, whichever flow makes it.

Usage: python -m tests.support.flow_child HOME CATALOG BOOTSTRAP ROOT PACKAGE TABLE N
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
from pathlib import Path

from infra.kafka import KafkaSettings
from infra.settings import Settings
from infra.spark import get_spark
from pipelines.authoring.load import load_registry
from pipelines.io.formats import TableFormats
from pipelines.run.runner import run_table


def main() -> None:
    home, catalog, bootstrap, root, package, table, n = sys.argv[1:8]
    sys.path.insert(0, root)
    settings = dataclasses.replace(
        Settings.from_env(home=Path(home)), catalog_name=catalog, kafka=KafkaSettings(bootstrap=bootstrap)
    )
    commits = {"n": 0}

    def killing(commit):
        def wrapper(self, *args, **kwargs):
            added = commit(self, *args, **kwargs)
            commits["n"] += 1
            if commits["n"] == int(n):
                os.killpg(os.getpgid(0), signal.SIGKILL)
            return added

        return wrapper

    # Every table commit: Spark appends, and the few rows of file health committed from Python.
    for method in ("append", "append_rows"):
        setattr(TableFormats, method, killing(getattr(TableFormats, method)))
    run_table(get_spark(settings), settings, load_registry([package]).get(table))
    sys.exit(3)  # reaching here means the kill point was never hit


if __name__ == "__main__":
    main()
