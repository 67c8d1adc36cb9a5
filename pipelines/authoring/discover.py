"""Datasets found, not listed: every package under `pipelines/datasets/`, plus modules named in the
`TRIBUTARY_DATASETS` setting (a team's own package), each imported whole with its `.sql` tables."""

from __future__ import annotations

import importlib
import pkgutil
import sysconfig
import traceback
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from infra.errors import ConfigError, first_line
from pipelines.authoring.declarations import DECLARED, FLOWS, Declaration, DeclarationError, FlowDeclaration, short_path
from pipelines.authoring.sql_tables import sql_declaration


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
        if exc.name and (exc.name == name or name.startswith(f"{exc.name}.")):
            raise ConfigError(
                f"dataset module {name!r} cannot be imported ({first_line(exc)}); check TRIBUTARY_DATASETS and "
                "that the package is installed in this environment"
            ) from None
        raise ConfigError(f"{_failing_line(exc)}: {first_line(exc)}; install it or fix the import") from None
    except Exception as exc:  # the author's module failed at import: one line naming its file and line
        message = exc.msg if isinstance(exc, SyntaxError) else first_line(exc)
        raise ConfigError(
            f"{_failing_line(exc)}: {type(exc).__name__}: {message}; fix the module (datasets are imported whole "
            "when they load)"
        ) from None


def _failing_line(exc: BaseException) -> str:
    """`file:line` of the author's code that raised `exc` (the deepest frame outside Python and its packages)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{short_path(exc.filename)}:{exc.lineno}"
    library = (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"], "<frozen ")
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(library)]
    return f"{short_path(frames[-1].filename)}:{frames[-1].lineno}" if frames else "dataset import"


def declarations(modules: Iterable[str], problems: list[str] | None = None) -> list[Declaration]:
    """Every table declared by `modules` (packages are imported with all their submodules and `.sql` files).

    With `problems`, a module or `.sql` file that cannot be loaded adds its line there and the others still load;
    without it, the first such error is raised.
    """
    modules = list(modules)
    found: list[Declaration] = []

    def attempt(load: Callable[[], object]) -> object | None:
        try:
            return load()
        except ConfigError as exc:
            if problems is None:
                raise
            problems.append(str(exc))
            return None

    for name in modules:
        module = attempt(lambda name=name: _import(name))
        if module is None:
            continue
        folders = [Path(p) for p in getattr(module, "__path__", [])]
        for folder in folders:
            for info in pkgutil.walk_packages([str(folder)], f"{name}.", onerror=lambda _name: None):
                attempt(lambda sub=info.name: _import(sub))
        found.extend(d for d in DECLARED if d.module == name or d.module.startswith(f"{name}."))
        for folder in folders:
            for path in sorted(folder.rglob("*.sql")):
                declared = attempt(lambda path=path, name=name: sql_declaration(path, name))
                if isinstance(declared, Declaration):
                    found.append(declared)
    return _with_flows(found, [f for f in FLOWS if _of(f.module, modules)], problems)


def _of(module: str, modules: Iterable[str]) -> bool:
    return any(module == name or module.startswith(f"{name}.") for name in modules)


def _with_flows(
    found: list[Declaration], flows: list[FlowDeclaration], problems: list[str] | None
) -> list[Declaration]:
    """`found` with each `tb.flow(...)` attached to the table it feeds (a module imported twice counts once)."""
    index = {d.name: i for i, d in enumerate(found)}
    for flow in {(f.module, f.where): f for f in flows}.values():
        i = index.get(flow.target)
        if i is None:
            error = DeclarationError(
                f"{flow.where}: flow {flow.name!r} feeds {flow.target!r}, which no dataset declares; declare the "
                "table with tb.landing(...) (or source=) first"
            )
            if problems is None:
                raise error
            problems.append(str(error))
            continue
        found[i] = replace(found[i], flows=(*found[i].flows, flow))
    return found
