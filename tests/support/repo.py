"""The repository root, for tests that run commands or read files relative to it, and the installed CLI."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The `tributary` command of the environment running the tests.
TRIBUTARY = str(Path(sys.executable).parent / "tributary")
