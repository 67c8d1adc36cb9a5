"""Child process for the serving crash test: one sync, SIGKILLed right after its N-th statement.

Usage: python -m tests.support.serve_child HOME CATALOG TABLE KEYS N   (KEYS comma-separated; N counts from 1)
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
from pathlib import Path

from infra.serving import sync
from infra.serving.config import ServeSettings
from infra.settings import Settings


def main() -> None:
    home, catalog, table, keys, after = sys.argv[1:6]
    settings = dataclasses.replace(Settings.from_env(home=home).with_home(Path(home)), catalog_name=catalog)
    count = {"n": 0}
    execute, copy = sync._execute, sync._copy

    def counted(step):
        def wrapper(cursor, *args):
            step(cursor, *args)
            count["n"] += 1
            if count["n"] == int(after):
                os.kill(os.getpid(), signal.SIGKILL)

        return wrapper

    sync._execute, sync._copy = counted(execute), counted(copy)
    sync.sync_table(settings, ServeSettings.from_env(), table, tuple(k for k in keys.split(",") if k))
    print(f"statements: {count['n']}")  # not killed: the parent learns how many there are


if __name__ == "__main__":
    main()
