"""Datasets found, not listed: every package under `pipelines/datasets/`, plus modules named in the
`TRIBUTARY_DATASETS` setting (a team's own package), each imported whole with its `.sql` tables."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from pathlib import Path

from infra.errors import ConfigError, first_line
from pipelines.authoring.build import build_registry
from pipelines.authoring.declarations import DECLARED, Declaration, DeclarationError
from pipelines.authoring.sql_tables import sql_declaration
from pipelines.spec.registry import Registry


def packages_under(package: str) -> list[str]:
    """The dataset packages and modules directly under `package` (e.g. `pipelines.datasets`)."""
    module = importlib.import_module(package)
    return [f"{package}.{info.name}" for info in pkgutil.iter_modules(module.__path__) if not info.name.startswith("_")]


def _import(name: str) -> object:
    try:
        return importlib.import_module(name)
    except ConfigError:
        raise
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"dataset module {name!r} cannot be imported ({first_line(exc)}); check TRIBUTARY_DATASETS and that "
            "the package is installed in this environment"
        ) from None


def declarations(modules: Iterable[str]) -> list[Declaration]:
    """Every table declared by `modules` (packages are imported with all their submodules and `.sql` files)."""
    found: list[Declaration] = []
    for name in modules:
        module = _import(name)
        folders = [Path(p) for p in getattr(module, "__path__", [])]
        for folder in folders:
            for info in pkgutil.walk_packages([str(folder)], f"{name}."):
                _import(info.name)
        found.extend(d for d in DECLARED if d.module == name or d.module.startswith(f"{name}."))
        for folder in folders:
            found.extend(sql_declaration(path, name) for path in sorted(folder.rglob("*.sql")))
    return found


def load_registry(modules: Iterable[str]) -> Registry:
    """The registry of every table of `modules`; a wrong declaration raises one line naming its place."""
    modules = list(modules)
    found = declarations(modules)
    if not found:
        raise DeclarationError(f"no tables are declared in {', '.join(modules) or 'any dataset'}")
    return build_registry(found)
