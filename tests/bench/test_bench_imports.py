"""Every `make bench` section imports and names an entry point, so a rename breaks `make test`, not the bench."""

from __future__ import annotations

import importlib

import pytest

from bench.run import SECTIONS


@pytest.mark.parametrize(("module", "function"), SECTIONS, ids=[m for m, _ in SECTIONS])
def test_bench_section_imports(module: str, function: str) -> None:
    assert callable(getattr(importlib.import_module(module), function))


def test_a_section_that_cannot_be_imported_fails_the_bench(monkeypatch, tmp_path, capsys) -> None:
    from bench import run

    monkeypatch.setattr(run, "SECTIONS", (("bench.no_such_section", "bench_nothing"),))
    monkeypatch.setattr(run, "RESULTS", tmp_path / "results.json")
    monkeypatch.setattr("sys.argv", ["bench.run"])
    assert run.main() == 1
    assert "no_such_section: cannot be imported" in capsys.readouterr().err
    assert "ModuleNotFoundError" in (tmp_path / "results.json").read_text()
