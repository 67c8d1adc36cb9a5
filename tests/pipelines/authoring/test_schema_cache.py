"""Inferred schemas are cached (per home, or in one folder homes share), and inferred again when the function's
file changes."""

from __future__ import annotations

import importlib
import itertools
import sys
from pathlib import Path

import pytest

from infra.errors import ConfigError
from pipelines.authoring.declarations import DECLARED
from pipelines.authoring.load import load_registry
from pipelines.authoring.schemas import schema_cache_folder
from tests.support.packages import write_package

_names = itertools.count()
TABLES = """
import pipelines.authoring as tb

tb.landing("bronze.{p}_raw", tb.files("{p}", "json", tb.schema("id string, n int")))


@tb.silver
def {p}_doubled(bronze_{p}_raw):
    return bronze_{p}_raw.withColumn("doubled", bronze_{p}_raw.n * 2)


@tb.silver
def {p}_labelled(bronze_{p}_raw):
    return bronze_{p}_raw.withColumn("LABEL", bronze_{p}_raw.id)
"""


def _forget(package: str) -> None:
    """As a new process would: the package is imported again and declares its tables anew."""
    DECLARED[:] = [d for d in DECLARED if not d.module.startswith(package)]
    for name in [m for m in sys.modules if m == package or m.startswith(f"{package}.")]:
        del sys.modules[name]
    importlib.invalidate_caches()


def _columns(package: str, table: str) -> list[str]:
    registry = load_registry([package])
    return registry.get(table).output.schema.names


def test_schemas_are_cached_and_inferred_again_after_a_change(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("TRIBUTARY_HOME", str(home))
    monkeypatch.delenv("TRIBUTARY_SCHEMA_CACHE", raising=False)  # the default: under the home
    package = f"schema_cache_{next(_names)}"
    write_package(tmp_path / "src", package, {"tables.py": TABLES.replace("{p}", package)})

    assert "doubled" in _columns(package, f"silver.{package}_doubled")
    assert "LABEL" in _columns(package, f"silver.{package}_labelled")
    cache = home / "cache" / "schemas"
    cached = sorted(cache.iterdir())
    assert len(cached) == 3  # the landed table and both silver tables

    # The same declarations again: read from the cache, nothing new written.
    _forget(package)
    assert "LABEL" in _columns(package, f"silver.{package}_labelled")
    assert sorted(cache.iterdir()) == cached

    # The function's file changed: that table (and only what depends on the file) is inferred again.
    source = tmp_path / "src" / package / "tables.py"
    source.write_text(source.read_text().replace('"LABEL"', '"TAG"'))
    _forget(package)
    columns = _columns(package, f"silver.{package}_labelled")
    assert "TAG" in columns and "LABEL" not in columns


def test_homes_given_one_schema_cache_share_it(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = tmp_path / "shared-cache"
    monkeypatch.setenv("TRIBUTARY_SCHEMA_CACHE", str(shared))
    package = f"schema_cache_{next(_names)}"
    write_package(tmp_path / "src", package, {"tables.py": TABLES.replace("{p}", package)})
    monkeypatch.setenv("TRIBUTARY_HOME", str(tmp_path / "first"))
    assert "doubled" in _columns(package, f"silver.{package}_doubled")
    cached = {p.name: p.stat().st_mtime_ns for p in shared.iterdir()}
    assert len(cached) == 3 and not (tmp_path / "first" / "cache").exists()

    # Another home loads the same declarations from the shared folder: nothing inferred, nothing written.
    _forget(package)
    monkeypatch.setenv("TRIBUTARY_HOME", str(tmp_path / "second"))
    assert "LABEL" in _columns(package, f"silver.{package}_labelled")
    assert {p.name: p.stat().st_mtime_ns for p in shared.iterdir()} == cached


def test_a_schema_cache_in_a_bucket_is_refused_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIBUTARY_SCHEMA_CACHE", "s3a://bucket/schemas")
    with pytest.raises(ConfigError, match=r"^TRIBUTARY_SCHEMA_CACHE='s3a://bucket/schemas': only the warehouse"):
        schema_cache_folder()
