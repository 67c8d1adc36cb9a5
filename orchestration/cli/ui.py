"""`tributary ui` (what `make ui` runs): Dagster's UI for this home (`dagster dev` on 127.0.0.1), stopped whole.

`dagster dev` starts a webserver, a daemon and code servers. Killed by SIGTERM it dies at once and leaves them
running until they notice (minutes); on SIGINT it stops them. So the UI runs in a process group of its own, and a
SIGTERM or SIGINT to this command is passed on as SIGINT; whatever of the group is still alive after
`STOP_SECONDS` is killed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from infra.settings import Settings

STOP_SECONDS = 20.0
WORKSPACE = Path(__file__).resolve().parents[2] / "workspace.yaml"


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)  # signal 0: only asks whether the group has a process left
    except ProcessLookupError:
        return False
    return True


def stop_group(process: subprocess.Popen[bytes], seconds: float = STOP_SECONDS) -> None:
    """SIGINT to the UI's process group, then SIGKILL to what is left after `seconds`."""
    pgid = process.pid
    if process.poll() is None:
        os.killpg(pgid, signal.SIGINT)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        process.poll()
        if not _group_alive(pgid):
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    process.wait()


def _ui(args: argparse.Namespace, settings: Settings) -> int:
    from orchestration.run import dagster_home

    dagster_home(settings)
    dagster = str(Path(sys.executable).parent / "dagster")
    command = [dagster, "dev", "-w", str(WORKSPACE), "-h", args.host, "-p", str(args.port)]
    process = subprocess.Popen(command, start_new_session=True)
    stopping: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        while process.poll() is None and not stopping:
            time.sleep(0.2)
    finally:
        stop_group(process)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0 if stopping else (process.returncode or 0)


def register(
    sub: argparse._SubParsersAction, handlers: dict[str, Callable[[argparse.Namespace, Settings], int]]
) -> None:
    """Add the `ui` subcommand."""
    ui = sub.add_parser("ui", help="Dagster's UI for this home (dagster dev on 127.0.0.1); Ctrl-C or SIGTERM stops all")
    ui.add_argument("--port", type=int, default=3000)
    ui.add_argument("--host", default="127.0.0.1", help="listen beyond 127.0.0.1 only when you mean to")
    handlers["ui"] = _ui
