"""Run a test child process that is expected to SIGKILL itself at a chosen point, and check that it did."""

from __future__ import annotations

import os
import subprocess
import sys

from infra.settings import Settings
from tests.support.jvm import short_lived
from tests.support.repo import REPO


def run_killed_child(settings: Settings, module: str, *arguments: str, env: dict[str, str] | None = None) -> None:
    """Run `python -m <module> <arguments>` on the test's home in its own session; fail unless it died by SIGKILL."""
    child = subprocess.run(
        [sys.executable, "-m", module, *arguments],
        cwd=REPO,
        env={**short_lived(dict(os.environ)), "TRIBUTARY_HOME": str(settings.home), **(env or {})},
        start_new_session=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert child.returncode == -9, f"{module} {' '.join(arguments)}: rc={child.returncode}\n{child.stderr[-3000:]}"
