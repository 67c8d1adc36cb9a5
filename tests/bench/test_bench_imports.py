"""Every `make bench` section imports and names an entry point, so a rename breaks `make test`, not the bench."""

from __future__ import annotations

import importlib

import pytest

from bench.run import SECTIONS


@pytest.mark.parametrize(("module", "function"), SECTIONS, ids=[m for m, _ in SECTIONS])
def test_bench_section_imports(module: str, function: str) -> None:
    assert callable(getattr(importlib.import_module(module), function))
