"""The repository root, for tests that run commands or read files relative to it."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
