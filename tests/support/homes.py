"""Isolated platform homes for tests: each has its own folder, SQLite catalog and catalog name."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

from infra.settings import Settings

_counter = itertools.count()


def make_settings(root: Path) -> Settings:
    """Settings rooted at `root` with a unique catalog name (so several can share one SparkSession)."""
    base = Settings.from_env(home=root)
    return replace(base.with_home(root), catalog_name=f"t{next(_counter)}")
