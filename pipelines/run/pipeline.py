"""Run registry tables in dependency order."""

from __future__ import annotations

from collections.abc import Iterable

from infra.settings import Settings
from infra.spark import Session
from pipelines.run import run_log
from pipelines.run.runner import run_table
from pipelines.sources.report import RunReport
from pipelines.spec.registry import Registry
from pipelines.spec.tables import TableSpec


def with_upstream(registry: Registry, names: Iterable[str]) -> list[str]:
    """`names` and every table they transitively read (`TableSpec.upstreams`), in registry order, each once.

    Upstreams include secondary streams and static reference tables (a stream-static join reads its reference
    side whole), so the chain is everything a run of `names` depends on. The registry declares every table after
    the tables it reads, so registry order runs each upstream before its readers. Unknown names raise the
    registry's `ConfigError` before anything runs.
    """
    wanted: set[str] = set()
    pending = list(names)
    while pending:
        name = pending.pop()
        if name in wanted:
            continue
        pending.extend(registry.get(name).upstreams)
        wanted.add(name)
    return [spec.name for spec in registry if spec.name in wanted]


def select_specs(
    registry: Registry, tables: Iterable[str] | None = None, *, include_upstream: bool = False
) -> list[TableSpec]:
    """The specs a run of `tables` (default: all) executes, in registry order; with their upstream chain if asked."""
    if tables is None:
        return list(registry)
    names = list(tables)
    wanted = set(with_upstream(registry, names)) if include_upstream else set(names)
    for name in wanted:
        registry.get(name)  # unknown names fail before anything runs
    return [spec for spec in registry if spec.name in wanted]


def run_pipeline(
    spark: Session,
    settings: Settings,
    registry: Registry,
    tables: Iterable[str] | None = None,
    *,
    include_upstream: bool = False,
    trigger: str = "cli",
) -> list[RunReport]:
    """Run the named tables (default: all) upstream first; stop at the first failure.

    With `include_upstream`, the tables they read (transitively, see `with_upstream`) run first, each once.
    Unless `spark` is a running session, it starts with the first table that has something to do (`run_table`).
    Each table's run is logged under one run id (`pipelines.run.run_log`); the rows are committed to
    `ops.run_log` at the end unless every table had nothing to do (then they wait for the next fold, and a
    no-op run commits nothing).
    """
    specs = select_specs(registry, tables, include_upstream=include_upstream)
    reports: list[RunReport] = []
    failed = True
    try:
        with run_log.run_context(trigger=trigger):
            for spec in specs:
                reports.append(run_table(spark, settings, spec))
        failed = False
    finally:
        if failed or not all(r.skipped for r in reports):
            run_log.fold_or_leave(settings)
    return reports
