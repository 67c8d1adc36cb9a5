"""Datasets declared in temporary packages, the way a team keeps its own (TRIBUTARY_DATASETS)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path


def write_package(root: Path, name: str, files: dict[str, str]) -> str:
    """Write package `name` under `root` with `files` (relative path → text) and make it importable."""
    package = root / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for relative, text in files.items():
        (package / relative).write_text(textwrap.dedent(text).lstrip())
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return name
