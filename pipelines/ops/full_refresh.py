"""Full refresh: drop a table, every table downstream of it and their checkpoints, and rebuild them all."""

from __future__ import annotations

import shutil
from contextlib import ExitStack

from pyspark.sql import SparkSession

from infra.errors import ConfigError, PipelineError
from infra.settings import Settings
from pipelines.io.archive import restore_archived
from pipelines.io.formats import TableFormat, table_format
from pipelines.run.locks import table_lock
from pipelines.run.runner import run_table
from pipelines.sources.report import RunReport
from pipelines.spec.registry import Registry
from pipelines.spec.tables import TableSpec


def _check_replayable(spark: SparkSession, fmt: TableFormat, upstream: str, table: str) -> None:
    """A rebuilt stream replays the upstream's appends from its first commit: all of them must still be there."""
    why = fmt.replay_problem(spark, upstream)
    if why:
        raise PipelineError(
            f"cannot fully refresh {table}: a rebuilt stream replays every append of {upstream}, but {why}, so the "
            f"rebuild would not match {upstream}; full-refresh {upstream} instead (it rebuilds everything downstream)"
        )


def check_confirmation(table: str, confirm: str) -> None:
    """A full refresh goes ahead only when `confirm` repeats the table name."""
    if confirm != table:
        raise ConfigError(
            f"full refresh of {table} deletes its data and checkpoint and those of every table downstream; "
            f"set confirm to {table!r} to proceed (got {confirm!r})"
        )


def full_refresh(
    spark: SparkSession, settings: Settings, registry: Registry, table: str, confirm: str
) -> list[RunReport]:
    """Drop `table`, every table downstream of it and their checkpoints; rebuild them all from the start.

    `confirm` must equal `table`. Downstream tables are rebuilt too because their checkpoints point into the
    dropped table's history. Refused when a rebuilt table streams from a table outside the rebuild whose append
    history is incomplete.
    """
    check_confirmation(table, confirm)
    chain = registry.downstream_closure([table])
    with ExitStack() as locks:
        for spec in chain:
            locks.enter_context(table_lock(settings, spec.name, settings.lock_wait_seconds))
        return _full_refresh(spark, settings, chain)


def _full_refresh(spark: SparkSession, settings: Settings, chain: list[TableSpec]) -> list[RunReport]:
    fmt = table_format(settings)
    rebuilt = {spec.name for spec in chain}
    for spec in chain:
        if not spec.source.replays_appends:  # a table following changes reads its upstreams whole on its first run
            continue
        for upstream in spec.streamed_upstreams:
            if upstream not in rebuilt:
                _check_replayable(spark, fmt, upstream, spec.name)
    for spec in chain:
        for flow in spec.all_flows():  # every flow starts again, a once-read one included
            if flow.source.archives():
                # Before anything is dropped: a crash then leaves files landed and already read, never lost.
                restore_archived(settings, flow.source)
    for spec in chain:
        for out in spec.outputs():
            fmt.drop(spark, out.name)
        shutil.rmtree(settings.checkpoint_for(spec.name), ignore_errors=True)
    return [run_table(spark, settings, spec) for spec in chain]
