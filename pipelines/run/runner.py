"""The incremental runner: one bounded run per table, whatever it reads, returning what it did in numbers.

The run is one loop over the calls of the table's source kind (`pipelines.sources.base.SourceKind`): checks,
whether anything is new, the batches, the bookkeeping after them. A streaming kind runs one bounded Spark query
(`pipelines.sources.stream_query`); Kafka plans its offsets on the driver (`pipelines.sources.kafka`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from infra.errors import PipelineError, TributaryError, first_line
from infra.files import write_atomically
from infra.home_record import catalog_identity, check_home
from infra.settings import Settings
from infra.spark import Session
from infra.stopwatch import Stopwatch
from pipelines.io.formats import table_format
from pipelines.run import run_log
from pipelines.run.locks import table_lock
from pipelines.sources import progress
from pipelines.sources.base import Run, SourceKind
from pipelines.sources.kinds import kind_of, lineage_of
from pipelines.sources.report import RunReport
from pipelines.spec.tables import Flow, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructField

# In a flow's checkpoint: the flow was declared `once` and has run.
ONCE_DONE = "_once_done"


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
    started_at = datetime.now(UTC)
    settings.require_platform_writable()  # before the lock file is created under the checkpoints folder
    check_home(
        settings.home, settings.table_format, catalog_identity(settings.home, settings.catalog_uri, settings.catalog_db)
    )
    progress.started(spec.name)
    try:
        with ExitStack() as held:
            with clock.stage("lock"):
                lock = held.enter_context(table_lock(settings, spec.name, settings.lock_wait_seconds))
            report = _run_locked(spark, settings, spec, clock, started, lock.fence)
    except Exception as exc:
        run_log.record(settings, spec.name, started_at, error=exc)
        progress.ended(spec.name, "failed", 0)
        raise
    report.stages = clock.rounded()
    run_log.record(settings, spec.name, started_at, report)
    progress.ended(spec.name, "skipped" if report.skipped else "succeeded", report.rows_in)
    return report


def _run_locked(
    session: Session, settings: Settings, spec: TableSpec, clock: Stopwatch, started: float, fence: Callable[[], None]
) -> RunReport:
    flows = spec.all_flows()
    fmt = table_format(settings)
    report = RunReport(table=spec.name, trigger=kind_of(spec.source).trigger)
    if len(flows) == 1:
        run = Run(session, settings, fmt, spec, clock, report, fence=fence)
        _run_flow(run, kind_of(spec.source), flows[0])
        return _finish(run, started)
    lineage = lineage_of(f.source for f in flows)
    runs = []
    for flow in flows:
        flow_started = time.perf_counter()
        run = Run(session, settings, fmt, _flow_spec(spec, flow, lineage), clock, RunReport(spec.name, report.trigger))
        run.fence = fence
        run.flow = flow.name
        _run_flow(run, kind_of(flow.source), flow)
        run.report.seconds = round(time.perf_counter() - flow_started, 3)
        session = run.session
        runs.append(run)
        report.flows[flow.name] = run.report
    return _finish(_merged(runs, spec, report), started)


def _flow_spec(spec: TableSpec, flow: Flow, lineage: tuple[StructField, ...]) -> TableSpec:
    """The table as one of its flows writes it: with that flow's source (its kind, checkpoint and bookkeeping are
    its own); rows of a kind that adds fewer lineage columns than the table holds get the others as NULL."""
    missing = [column for column in lineage if column not in kind_of(flow.source).lineage()]
    transform = spec.transform
    if missing:

        def transform(df: DataFrame) -> DataFrame:
            return spec.transform(df.select("*", *[F.lit(None).cast(c.dataType).alias(c.name) for c in missing]))

    return replace(spec, source=flow.source, flows=(), transform=transform)


def _run_flow(run: Run, kind: SourceKind, flow: Flow) -> None:
    """One flow's run: checks, the skip check, its batches and its bookkeeping."""
    done = run.checkpoint / ONCE_DONE
    if flow.once and done.is_file():  # a flow declared once has run: it is never read again
        run.report.skipped = True
        run.report.note = f"flow {flow.name} was read once, at its first run, and is not read again"
        return
    with run.clock.stage("checks"):
        _check_upstreams(run)
        kind.check(run)
    try:
        with run.clock.stage("skip_check"):
            nothing = kind.nothing_to_read(run)
    except TributaryError:
        raise
    except Exception as exc:
        raise PipelineError(f"table {run.spec.name}: could not start its stream: {first_line(exc)}") from exc
    if nothing:  # no batch could run: skip the query
        kind.after_run(run, skipped=True)
        _prepare_missing(run, kind)
        run.report.skipped = True
    else:
        kind.read_batches(run)
        kind.after_run(run, skipped=False)
    if flow.once and run.report.data_batches:
        write_atomically(done, "read once\n")


def _merged(runs: list[Run], spec: TableSpec, report: RunReport) -> Run:
    """One run of the whole table from the runs of its flows: their rows, batches, metrics and files added up."""
    first = runs[0]
    merged = Run(runs[-1].session, first.settings, first.fmt, spec, first.clock, report)
    for run in runs:
        merged.metrics.update(run.metrics)
        merged.files.extend(run.files)
        report.rows_in += run.report.rows_in
        report.batches += run.report.batches
        report.data_batches += run.report.data_batches
        report.batch_durations_ms.extend(run.report.batch_durations_ms)
        report.landing_warnings.extend(run.report.landing_warnings)
        run.report.metrics = dict(run.metrics)
    notes = [f"flow {run.flow}: {run.report.note}" for run in runs if run.report.note]
    report.note = "; ".join(notes) or None
    report.skipped = all(run.report.skipped for run in runs)
    return merged


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
