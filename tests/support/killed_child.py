"""Run a test child process that is expected to SIGKILL itself at a chosen point, and check that it did."""

from __future__ import annotations

import os
import subprocess
import sys

from infra.settings import Settings
from infra.spark import DRIVER_JAVA_OPTIONS
from tests.support.repo import REPO

# A killed child's JVM lives for seconds: without the optimizing JIT compiler and with the single-threaded
# collector it did the same work in 20-25 % less time here (a cold gold.user_visits child: 22 s against 16.5 s,
# three runs each), as the two compete with the run for this machine's two cores.
SHORT_LIVED_JVM = f"{DRIVER_JAVA_OPTIONS}=-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


def run_killed_child(settings: Settings, module: str, *arguments: str, env: dict[str, str] | None = None) -> None:
    """Run `python -m <module> <arguments>` on the test's home in its own session; fail unless it died by SIGKILL."""
    given = os.environ.get("TRIBUTARY_SPARK_CONF")
    spark_conf = f"{given},{SHORT_LIVED_JVM}" if given else SHORT_LIVED_JVM
    child = subprocess.run(
        [sys.executable, "-m", module, *arguments],
        cwd=REPO,
        env={**os.environ, "TRIBUTARY_HOME": str(settings.home), "TRIBUTARY_SPARK_CONF": spark_conf, **(env or {})},
        start_new_session=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert child.returncode == -9, f"{module} {' '.join(arguments)}: rc={child.returncode}\n{child.stderr[-3000:]}"
