"""Whether Tributary can create and write a folder, and a folder that would work instead (for the messages)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def writable_problem(path: Path) -> str | None:
    """Why Tributary could not create or write folder `path`, or None when it can."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"no permission to write in {existing}"
    return None


# Where each path setting lives under a home folder, as `Settings.from_env` and `Settings.with_home` place it.
UNDER_HOME = {
    "home": ".",
    "landing": "landing",
    "warehouse": "warehouse",
    "checkpoints": "checkpoints",
    "catalog_db": "catalog.db",
    "scratch": "tmp",
}


def writable_suggestion(name: str, avoid: Path) -> Path:
    """A path for setting `name` whose folder could be created and written, outside folder `avoid`."""
    roots = (Path.cwd() / ".tributary", Path.home() / ".tributary", Path(tempfile.gettempdir()) / "tributary")
    for root in roots:
        candidate = (root / UNDER_HOME[name]).resolve()
        folder = candidate.parent if name == "catalog_db" else candidate
        if not folder.is_relative_to(avoid) and writable_problem(folder) is None:
            return candidate
    return roots[-1] / UNDER_HOME[name]
