"""`tributary ui` (`make ui`): Dagster's UI on 127.0.0.1, and a SIGTERM stops every process it started."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from infra.ports import free_port
from tests.support.devserver import wait_for
from tests.support.repo import REPO, TRIBUTARY


def _group(pgid: int) -> list[int]:
    """The live processes of process group `pgid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.mark.slow
def test_sigterm_stops_the_ui_and_everything_it_started(tmp_path):
    port = free_port()
    env = {**os.environ, "TRIBUTARY_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "dagster")}
    ui = subprocess.Popen([TRIBUTARY, "ui", "--port", str(port)], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        wait_for(lambda: _answers(port), 180, "the Dagster UI to answer")
        children = subprocess.run(["pgrep", "-P", str(ui.pid)], capture_output=True, text=True).stdout.split()
        assert len(children) == 1, children  # dagster dev, leading its own group
        group = int(children[0])
        assert len(_group(group)) >= 3  # dagster dev, its webserver, its daemon (and code servers)
        started = time.monotonic()
        ui.send_signal(signal.SIGTERM)
        assert ui.wait(timeout=60) == 0, ui.stderr.read()[-2000:] if ui.stderr else ""
        assert _group(group) == [] and not _answers(port)
        assert time.monotonic() - started < 40
    finally:
        if ui.poll() is None:
            ui.kill()
            ui.wait()
