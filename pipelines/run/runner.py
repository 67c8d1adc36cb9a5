"""The incremental runner: one bounded run per table, whatever it reads, returning what it did in numbers.

The run is one loop over the calls of the table's source kind (`pipelines.sources.base.SourceKind`): checks,
whether anything is new, the batches, the bookkeeping after them. A streaming kind runs one bounded Spark query
(`pipelines.sources.stream_query`); Kafka plans its offsets on the driver (`pipelines.sources.kafka`).
"""

from __future__ import annotations

import time
from contextlib import ExitStack

from infra.errors import PipelineError, TributaryError, first_line
from infra.settings import Settings
from infra.spark import Session
from infra.stopwatch import Stopwatch
from pipelines.io.formats import table_format
from pipelines.run.locks import table_lock
from pipelines.sources.base import Run, SourceKind
from pipelines.sources.kinds import kind_of
from pipelines.sources.report import RunReport
from pipelines.spec.tables import TableSpec


def run_table(spark: Session, settings: Settings, spec: TableSpec) -> RunReport:
    """Run `spec` incrementally: process everything available, commit, stop, and report.

    Unless `spark` is a running session, the session starts only if the run needs it: a run with nothing new, on a
    SQLite catalog with local metadata, reads only files and metadata and starts no JVM.

    The table's writer lock is held for the whole run, so a second run of the same table (CLI or Dagster)
    waits for this one (see `pipelines.run.locks`). The report's `stages` say where the time went: `lock`,
    `checks` (upstreams, landed files, offsets), `skip_check`, `plan`, `prepare_tables`, `stream` (the query,
    including its batches' `batch.write`, `batch.append` and `batch.commit_lookup`), `all_read`, `archive` and
    `stats`.
    """
    clock = Stopwatch()
    started = time.perf_counter()
    settings.require_platform_writable()  # before the lock file is created under the checkpoints folder
    with ExitStack() as held:
        with clock.stage("lock"):
            held.enter_context(table_lock(settings, spec.name, settings.lock_wait_seconds))
        report = _run_locked(spark, settings, spec, clock, started)
    report.stages = clock.rounded()
    return report


def _run_locked(session: Session, settings: Settings, spec: TableSpec, clock: Stopwatch, started: float) -> RunReport:
    kind = kind_of(spec.source)
    run = Run(session, settings, table_format(settings), spec, clock, RunReport(table=spec.name, trigger=kind.trigger))
    with clock.stage("checks"):
        _check_upstreams(run)
        kind.check(run)
    try:
        with clock.stage("skip_check"):
            nothing = kind.nothing_to_read(run)
    except TributaryError:
        raise
    except Exception as exc:
        raise PipelineError(f"table {spec.name}: could not start its stream: {first_line(exc)}") from exc
    if nothing:  # no batch could run: skip the query
        kind.after_run(run, skipped=True)
        _prepare_missing(run, kind)
        run.report.skipped = True
    else:
        kind.read_batches(run)
        kind.after_run(run, skipped=False)
    return _finish(run, started)


def _prepare_missing(run: Run, kind: SourceKind) -> None:
    """Create the tables of a skipped run that do not exist yet. Tables that exist were checked against the spec
    when written; a spec change is checked (and a declared column added) by the next run that writes."""
    with run.clock.stage("prepare_tables"):
        spark = run.running()
        if not all(run.fmt.exists(spark, out.name) for out in run.spec.outputs()):
            kind.prepare_tables(run.spark(), run.fmt, run.spec)


def _finish(run: Run, started: float) -> RunReport:
    """The report's metrics, table statistics, time and throughput."""
    report = run.report
    report.metrics = dict(run.metrics)
    report.files = run.files
    with run.clock.stage("stats"):
        spark = run.running()
        report.tables = {out.name: run.fmt.stats(spark, out.name) for out in run.spec.outputs()}
    report.seconds = round(time.perf_counter() - started, 3)
    if not report.processed_rows_per_second and report.seconds and report.rows_in:
        report.processed_rows_per_second = round(report.rows_in / report.seconds, 1)
    return report


def _check_upstreams(run: Run) -> None:
    """Fail with one line when a table this spec reads has not been created yet."""
    spark = run.running()
    for table in run.spec.upstreams:
        if not run.fmt.exists(spark, table):
            name = run.spec.name
            raise PipelineError(
                f"table {name}: its upstream {table} does not exist yet; create it first with "
                f"'tributary run {table}', or run 'tributary run --with-upstream {name}'"
            )
