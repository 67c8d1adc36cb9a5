"""Datasets loaded into a registry, checked whole: every table built and planned, every problem on its own line.

Loading goes on past a problem, so one pass names them all: a module that cannot be imported, a `.sql` file
Spark cannot parse or analyse, an input no dataset declares, a function that cannot be planned on its inputs'
schemas, a watermark on a column its input lacks, a declared schema the function does not return, a query its
write kind's output mode cannot stream. A table that reads a table with a problem is not planned (its inputs'
schemas are unknown) and is counted as not checked. `tributary validate`, `tributary run` and Dagster's
definitions run the same checks; the planning is cached with the schemas (`pipelines.authoring.schemas`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from infra.errors import ConfigError
from pipelines.authoring.build import build_spec, ordered
from pipelines.authoring.declarations import Declaration, DeclarationError
from pipelines.authoring.discover import declarations
from pipelines.authoring.sinks import sinks_of
from pipelines.spec.registry import Registry
from pipelines.spec.tables import TableSpec


@dataclass(frozen=True)
class Validation:
    """What loading found: one line per problem, the registry of the tables without one, and those not
    checked because a table they read has a problem."""

    problems: tuple[str, ...]
    registry: Registry
    unchecked: tuple[str, ...]

    def raise_problems(self) -> None:
        """Raise one DeclarationError holding every problem (one line each); nothing when there is none."""
        if len(self.problems) == 1:
            raise DeclarationError(self.problems[0])
        if self.problems:
            lines = "\n".join(self.problems)
            raise DeclarationError(f"{len(self.problems)} problems in the datasets (one per line):\n{lines}")


def check_declarations(found: list[Declaration], problems: list[str] | None = None) -> Validation:
    """Build and plan every declaration in `found`, collecting problems (after any already in `problems`)."""
    problems = list(problems or [])
    registry = Registry()
    specs: dict[str, TableSpec] = {}
    for d in ordered(found, problems):
        if any(p.table not in specs for p in d.params):
            continue  # an input has a problem: its schema is unknown
        try:
            specs[d.name] = _checked(d, specs, registry)
        except DeclarationError as exc:
            problems.append(str(exc))
    named = " ".join(problems)
    unchecked = tuple(d.name for d in found if d.name not in specs and repr(d.name) not in named)
    return Validation(tuple(problems), registry, unchecked)


def _checked(d: Declaration, specs: dict[str, TableSpec], registry: Registry) -> TableSpec:
    """`d`'s spec, planned and added to `registry`; a problem of the declaration raises a DeclarationError naming
    its place. A problem of the environment (a setting, Java, Spark's start) is not the dataset's: it propagates
    as it is, once, instead of once per table."""
    try:
        spec = build_spec(d, specs)
    except DeclarationError:
        raise
    except ConfigError as exc:
        raise DeclarationError(f"{d.where}: {exc}") from None
    for out in spec.outputs():
        _ = out.schema  # plans the function: its problems are DeclarationErrors (pipelines.authoring.schemas)
    try:
        registry.add(spec)
    except DeclarationError:
        raise
    except ConfigError as exc:
        raise DeclarationError(f"{d.where}: {exc}") from None
    return spec


def check_datasets(modules: Iterable[str]) -> Validation:
    """Load `modules` and plan every table (and sink) they declare, collecting every problem instead of stopping
    at one."""
    modules = list(modules)
    problems: list[str] = []
    found = declarations(modules, problems)
    if not found and not problems:
        where = ", ".join(modules) or "any dataset"
        problems.append(f"no tables are declared in {where}; declare one (docs/authoring.md)")
    result = check_declarations(found, problems)
    sink_problems = []
    for sink in sinks_of(modules):
        if sink.table in result.unchecked or repr(sink.table) in " ".join(result.problems):
            continue  # its table has a problem of its own
        try:
            result.registry.add_sink(sink)
        except ConfigError as exc:
            sink_problems.append(f"{sink.where}: {exc}")
    return replace(result, problems=(*result.problems, *sink_problems)) if sink_problems else result


def build_registry(found: list[Declaration]) -> Registry:
    """The registry of `found`, upstream tables first; raises every problem (`Validation.raise_problems`)."""
    result = check_declarations(found)
    result.raise_problems()
    return result.registry


def load_registry(modules: Iterable[str]) -> Registry:
    """The registry of every table of `modules`; raises every problem, one line each, naming its place."""
    result = check_datasets(modules)
    result.raise_problems()
    return result.registry
