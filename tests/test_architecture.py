"""The architecture stays as designed: one-way layers, no import cycles, no oversized product modules.

- The project's own import contracts (pyproject.toml `[tool.importlinter]`) are kept.
- Those same contracts, copied into a tiny fixture tree, really break on an upward import (between the top
  packages and inside `pipelines`) and on an import cycle between siblings, naming the offending import; a
  clean fixture passes, so a failure is the import's and not the fixture's.
- No product module is over the size limit.

Fast: no Spark, each `lint-imports` run takes about a second.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.support.repo import REPO

PRODUCT_PACKAGES = ("orchestration", "pipelines", "quality", "infra")
MAX_LINES = 350


def _lint_imports() -> str:
    """The `lint-imports` of the interpreter running the tests (the venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / "lint-imports"
    if beside.exists():
        return str(beside)
    found = shutil.which("lint-imports")
    if found is None:
        pytest.fail("lint-imports is not installed (it is a dev dependency in pyproject.toml)")
    return found


def _run_lint(cwd: Path, *args: str, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [_lint_imports(), "--no-cache", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _real_importlinter() -> dict[str, Any]:
    with (REPO / "pyproject.toml").open("rb") as fh:
        return tomllib.load(fh)["tool"]["importlinter"]


# --- the project's own contracts ----------------------------------------------------------------------------


def test_project_import_contracts_are_kept() -> None:
    result = _run_lint(REPO)
    assert result.returncode == 0, f"lint-imports failed:\n{result.stdout}\n{result.stderr}"
    assert "0 broken" in result.stdout


def test_project_declares_the_layer_and_acyclic_contracts() -> None:
    config = _real_importlinter()
    contracts = config["contracts"]
    assert sorted(config["root_packages"]) == sorted(PRODUCT_PACKAGES)
    top = [c for c in contracts if c["type"] == "layers" and "containers" not in c]
    inner = [c for c in contracts if c["type"] == "layers" and c.get("containers") == ["pipelines"]]
    acyclic = [c for c in contracts if c["type"] == "acyclic_siblings"]
    assert [c["layers"] for c in top] == [["orchestration", "quality", "pipelines", "infra"]]
    assert [c["layers"] for c in inner] == [
        ["datasets", "authoring", "ops", "deliver", "run", "sources", "write", "io", "transforms", "spec"]
    ]
    assert [sorted(c["ancestors"]) for c in acyclic] == [sorted(PRODUCT_PACKAGES)]


# --- the same contracts on a fixture tree ------------------------------------------------------------------


def _toml_value(value: Any) -> str:
    """A TOML literal for the strings, lists of strings and booleans an import-linter contract holds."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"unexpected value in the import-linter contract: {value!r}")


def _write_config(path: Path, config: dict[str, Any]) -> None:
    lines = ["[tool.importlinter]"]
    lines += [f"{key} = {_toml_value(value)}" for key, value in config.items() if key != "contracts"]
    for contract in config["contracts"]:
        lines += ["", "[[tool.importlinter.contracts]]"]
        lines += [f"{key} = {_toml_value(value)}" for key, value in contract.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _write_module(root: Path, dotted: str, body: str = "") -> None:
    """Write module `dotted` (e.g. `pipelines.spec.rules`) with `body`, creating its packages."""
    parts = dotted.split(".")
    folder = root
    for part in parts[:-1]:
        folder = folder / part
        folder.mkdir(exist_ok=True)
        (folder / "__init__.py").touch()
    (folder / f"{parts[-1]}.py").write_text(body, encoding="utf-8")


def _fixture_tree(root: Path) -> Path:
    """Packages named like the product's, importing only downward; returns the config file to lint with."""
    config = _real_importlinter()
    for package in config["root_packages"]:
        _write_module(root, f"{package}.__init__")
    for contract in config["contracts"]:
        for container in contract.get("containers", []):
            for layer in contract["layers"]:
                _write_module(root, f"{container}.{layer}.__init__")
    _write_module(root, "infra.x")
    _write_module(root, "pipelines.spec.x", "import infra.x\n")
    _write_module(root, "pipelines.transforms.x", "import pipelines.spec.x\n")
    _write_module(root, "pipelines.x", "import pipelines.transforms.x\nimport infra.x\n")
    _write_module(root, "quality.x", "import pipelines.x\n")
    _write_module(root, "orchestration.x", "import quality.x\nimport pipelines.x\n")
    config_file = root / "pyproject.toml"
    _write_config(config_file, config)
    return config_file


def _lint_fixture(root: Path, config_file: Path) -> subprocess.CompletedProcess[str]:
    return _run_lint(root, "--config", str(config_file), pythonpath=root)


def test_fixture_with_downward_imports_only_keeps_the_contracts(tmp_path: Path) -> None:
    config_file = _fixture_tree(tmp_path)
    result = _lint_fixture(tmp_path, config_file)
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    assert f"{len(_real_importlinter()['contracts'])} kept, 0 broken" in result.stdout


def test_upward_import_from_infra_into_pipelines_breaks_the_layers(tmp_path: Path) -> None:
    config_file = _fixture_tree(tmp_path)
    _write_module(tmp_path, "infra.bad", "import pipelines.x\n")
    result = _lint_fixture(tmp_path, config_file)
    assert result.returncode != 0
    assert "infra.bad -> pipelines.x" in result.stdout, result.stdout
    assert "1 broken" in result.stdout


def test_upward_import_inside_pipelines_breaks_the_inner_layers(tmp_path: Path) -> None:
    config_file = _fixture_tree(tmp_path)
    _write_module(tmp_path, "pipelines.spec.bad", "from pipelines.transforms import x\n")
    result = _lint_fixture(tmp_path, config_file)
    assert result.returncode != 0
    assert "pipelines.spec.bad -> pipelines.transforms.x" in result.stdout, result.stdout
    assert "Inside pipelines" in result.stdout


def test_import_cycle_between_siblings_breaks_the_acyclic_contract(tmp_path: Path) -> None:
    config_file = _fixture_tree(tmp_path)
    _write_module(tmp_path, "quality.a", "import quality.b\n")
    _write_module(tmp_path, "quality.b", "import quality.a\n")
    result = _lint_fixture(tmp_path, config_file)
    assert result.returncode != 0
    assert "No cycles are allowed in quality." in result.stdout, result.stdout
    # The report names the dependency to remove, relative to the package: `.b -> .a` (or `.a -> .b`).
    assert re.search(r"^- \.(a -> \.b|b -> \.a) ", result.stdout, re.MULTILINE), result.stdout
    assert "1 broken" in result.stdout


# --- module size -------------------------------------------------------------------------------------------


def test_no_product_module_is_over_the_line_limit() -> None:
    too_long = {}
    for package in PRODUCT_PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_LINES:
                too_long[path.relative_to(REPO).as_posix()] = lines
    listing = "\n".join(f"  {name}: {lines} lines" for name, lines in sorted(too_long.items()))
    assert not too_long, f"product modules over {MAX_LINES} lines (split them):\n{listing}"


# --- sources are strategies ----------------------------------------------------------------------------------

SOURCE_CLASSES = (
    "FileSource",
    "KafkaSource",
    "TableSource",
    "StaticSource",
    "DeltaChangesSource",
    "TableChangesSource",
)
_CLASS_TEST = re.compile(r"isinstance\([^)]*\b(" + "|".join(SOURCE_CLASSES) + r")\b")


def test_no_code_outside_the_sources_package_tests_a_source_class() -> None:
    """A source's kind is picked in one place (`pipelines.sources.kinds`); everything else asks the kind."""
    found = []
    for package in PRODUCT_PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            relative = path.relative_to(REPO).as_posix()
            if relative.startswith("pipelines/sources/"):
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if _CLASS_TEST.search(line):
                    found.append(f"{relative}:{number}: {line.strip()}")
    assert not found, "source classes tested outside pipelines/sources:\n" + "\n".join(found)


def test_the_class_test_finds_a_source_class_test() -> None:
    """The pattern above really matches the checks it forbids (so the test can fail)."""
    assert _CLASS_TEST.search("if isinstance(spec.source, FileSource):")
    assert _CLASS_TEST.search("isinstance(x, TableSource | StaticSource)")
    assert not _CLASS_TEST.search("isinstance(source, Source) and source.lands")


def test_every_source_kind_runs_through_one_runner() -> None:
    """One runner loop serves every kind: no second runner module, and every declaration class has a kind."""
    from pipelines.sources.kinds import kind_of
    from pipelines.spec.sources import Source

    assert not (REPO / "pipelines" / "run" / "kafka_run.py").exists()
    declared, pending = set(), [Source]
    while pending:
        for cls in pending.pop().__subclasses__():
            declared.add(cls)
            pending.append(cls)
    assert {cls.__name__ for cls in declared} == set(SOURCE_CLASSES)
    assert declared <= set(kind_of.__globals__["_KINDS"])


def test_orchestration_names_no_dataset():
    """Datasets are discovered: no module of orchestration imports or names a dataset package."""
    datasets = sorted(p.name for p in (REPO / "pipelines" / "datasets").iterdir() if (p / "__init__.py").exists())
    assert datasets, "no dataset packages found"
    for path in (REPO / "orchestration").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for name in datasets:
            assert f"pipelines.datasets.{name}" not in text, f"{path.relative_to(REPO)} names dataset {name}"
