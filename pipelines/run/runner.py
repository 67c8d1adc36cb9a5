"""The incremental runner: one bounded streaming run per table, returning what it did in numbers."""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from infra.errors import PipelineError, TributaryError, first_line
from infra.settings import Settings
from infra.spark import Session, running_session, started_session
from infra.stopwatch import Stopwatch
from pipelines.io.archive import archive_committed
from pipelines.io.checkpoints import mark_finished, pin_initial_offsets, plan_owed_no_data_batch
from pipelines.io.formats import TableFormats, table_format
from pipelines.io.landing import landing_folder, unread_subfolders
from pipelines.io.landing_parse import CsvHeaders
from pipelines.io.sources import (
    check_all_read,
    check_landed_files,
    csv_headers,
    find_unreadable_file,
    landed_files,
    read_files,
)
from pipelines.run import streams
from pipelines.run.kafka_run import run_kafka_table
from pipelines.run.locks import table_lock
from pipelines.run.report import RunReport, count_landed, fill_from_progress
from pipelines.spec.modes import check_query_mode
from pipelines.spec.tables import FileSource, KafkaSource, StaticSource, TableSource, TableSpec
from pipelines.write import file_health
from pipelines.write.sinks import BatchContext

# A CSV file that lands while a run starts has no header in the run's plan: the query restarts to read it.
_HEADER_RESTARTS = 3
_LANDED_DURING_START = file_health.LandedDuringStart.__name__


# Every source runs bounded with availableNow: everything available when the query starts (split by the source's
# per-batch limit), then Spark's no-data batch when the watermark moved (it emits the windows, sessions and join rows
# the watermark closed, and later rows are judged against it), then stop. Iceberg's stream implements it from 1.11;
# its initial offset is moved to the committed end before each run (`pin_initial_offsets`), since its availableNow
# plan walks from there and fails once maintenance has expired the stream's first snapshot.
TRIGGER = "availableNow"


def source_frame(
    spark: SparkSession, settings: Settings, fmt: TableFormats, spec: TableSpec, headers: CsvHeaders | None = None
) -> DataFrame:
    """The spec's streaming input after its transform (a file source's transform runs per batch, after checks)."""
    if isinstance(spec.source, FileSource):
        return read_files(spark, settings, spec.source, headers)
    if streams.needs_query_frame(spec):
        return streams.query_frame(spark, settings, fmt, spec)
    df = fmt.read_stream(spark, spec.source.table)
    if spec.watermark is not None:
        df = streams.guard_time_range(df, spec.watermark)
        df = df.withWatermark(spec.watermark.column, spec.watermark.delay)
    return spec.transform(df)


def prepare_tables(spark: SparkSession, fmt: TableFormats, spec: TableSpec) -> None:
    """Create the spec's output tables if missing, in the spec's format (a bronze table under `add_new_columns`
    may hold more columns)."""
    evolving = isinstance(spec.source, FileSource) and spec.source.schema_evolution == "add_new_columns"
    for out in spec.outputs():
        fmt.ensure_table(spark, out, evolving and out.name == spec.name, spec.table_format)


def write_micro_batch(ctx: BatchContext, df: DataFrame, spec: TableSpec, headers: CsvHeaders | None = None) -> None:
    """Write one micro-batch of `spec`'s query: landed rows checked file by file, late rows to the late table,
    the rest through the spec's sink."""
    if isinstance(spec.source, FileSource):
        file_health.write_landed(ctx, df, spec, headers)
    elif spec.late_table:
        streams.write_with_late_rows(ctx, df, spec)
    else:
        spec.sink.write(ctx, df)


def run_table(spark: Session, settings: Settings, spec: TableSpec) -> RunReport:
    """Run `spec` incrementally: process everything available, commit, stop, and report.

    Unless `spark` is a running session, the session starts only if the run needs it: a run with nothing new, on a
    SQLite catalog with local metadata, reads only files and metadata and starts no JVM.

    The table's writer lock is held for the whole run, so a second run of the same table (CLI or Dagster)
    waits for this one (see `pipelines.run.locks`). The report's `stages` say where the time went: `lock`,
    `checks` (upstreams, landed files), `skip_check`, `plan`, `prepare_tables`, `stream` (the query, including
    its batches' `batch.write`, `batch.append` and `batch.commit_lookup`), `all_read`, `archive` and `stats`.
    """
    clock = Stopwatch()
    started = time.perf_counter()
    settings.require_platform_writable()  # before the lock file is created under the checkpoints folder
    with ExitStack() as held:
        with clock.stage("lock"):
            held.enter_context(table_lock(settings, spec.name, settings.lock_wait_seconds))
        if isinstance(spec.source, KafkaSource):
            report = run_kafka_table(spark, settings, spec, clock, prepare_tables)
        else:
            report = _run_locked(spark, settings, spec, clock, started)
    report.stages = clock.rounded()
    return report


def _run_locked(session: Session, settings: Settings, spec: TableSpec, clock: Stopwatch, started: float) -> RunReport:
    fmt = table_format(settings)
    spark = running_session(session)
    report = RunReport(table=spec.name, trigger=TRIGGER)
    checkpoint = settings.checkpoint_for(spec.name)
    metrics: Counter[str] = Counter()
    landed = None
    with clock.stage("checks"):
        _check_upstreams(spark, fmt, spec)
        if isinstance(spec.source, FileSource):
            folder = landing_folder(settings, spec.source)
            if not folder.is_dir():
                report.note = f"nothing has landed yet: landing folder {folder} does not exist"
            else:
                landed = check_landed_files(settings, spec.source, spec.name, checkpoint)
                report.landing_warnings = _subfolder_warnings(spec.name, folder)
    try:
        with clock.stage("skip_check"):
            plan_owed_no_data_batch(checkpoint)
            pin_initial_offsets(checkpoint, _live_snapshots(settings, spec))
            nothing = streams.nothing_to_read(spark, settings, fmt, spec)
        if nothing:  # no batch could run: skip the query
            if landed is not None:  # fingerprints (and archives) files a killed run left unrecorded
                _after_all_read(settings, spec, landed, checkpoint, clock, report)
            return _skipped(session, settings, fmt, spec, report, started, clock)
    except TributaryError:
        raise
    except Exception as exc:
        raise PipelineError(f"table {spec.name}: could not start its stream: {first_line(exc)}") from exc
    spark = started_session(session, settings)
    progress: list[dict[str, Any]] = []
    files: list[file_health.FileHealth] = []
    stage_mb = settings.stage_landing_mb
    for attempt in range(_HEADER_RESTARTS + 1):
        headers = None
        if isinstance(spec.source, FileSource) and landed is not None:
            headers = csv_headers(spec.source, list(landed_files(settings, spec.source).values()))

        def write_batch(df: DataFrame, batch_id: int, headers: CsvHeaders | None = headers) -> None:
            ctx = BatchContext(spark, fmt, spec.name, checkpoint, batch_id, metrics, files, clock, stage_mb << 20)
            with clock.stage("batch.write"):
                write_micro_batch(ctx, df, spec, headers)

        try:
            progress.extend(_run_query(spark, settings, fmt, spec, write_batch, clock, headers))
            break
        except file_health.LandedDuringStart:
            if attempt == _HEADER_RESTARTS:
                raise
    mark_finished(checkpoint)
    fill_from_progress(report, progress, streams.source_copies(spec))
    if isinstance(spec.source, FileSource):
        count_landed(report, metrics.pop(file_health.LANDED_ROWS, 0), metrics.pop(file_health.LANDED_BATCHES, 0))
    report.metrics = dict(metrics)
    if landed is not None:
        _after_all_read(settings, spec, landed, checkpoint, clock, report)
    report.files = files
    with clock.stage("stats"):
        report.tables = {out.name: fmt.stats(spark, out.name) for out in spec.outputs()}
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _skipped(
    session: Session,
    settings: Settings,
    fmt: TableFormats,
    spec: TableSpec,
    report: RunReport,
    started: float,
    clock: Stopwatch,
) -> RunReport:
    with clock.stage("prepare_tables"):
        # Tables that exist were checked against the spec when written; a spec change is checked (and a declared
        # column added) by the next run that writes.
        spark = running_session(session)
        if not all(fmt.exists(spark, out.name) for out in spec.outputs()):
            spark = started_session(session, settings)
            prepare_tables(spark, fmt, spec)
    report.skipped = True
    with clock.stage("stats"):
        report.tables = {out.name: fmt.stats(spark, out.name) for out in spec.outputs()}
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _after_all_read(
    settings: Settings, spec: TableSpec, landed: dict[str, Path], checkpoint: Path, clock: Stopwatch, report: RunReport
) -> None:
    """Check that every file landed when the run started was read; then archive them if the source says so."""
    source = spec.source
    assert isinstance(source, FileSource)
    with clock.stage("all_read"):
        check_all_read(spec.name, landed, checkpoint)
    if source.archive:
        with clock.stage("archive"):
            report.metrics["files_archived"] = archive_committed(settings, source, checkpoint, landed)


def _subfolder_warnings(table: str, folder: Path) -> list[str]:
    """One line naming the subfolders of a landing folder that hold files, which no run reads."""
    names = unread_subfolders(folder)
    if not names:
        return []
    return [
        f"table {table}: landing folder {folder} holds subfolder(s) {', '.join(names)} whose files are not read "
        "(landing is not recursive); move those files into the landing folder itself"
    ]


def _check_upstreams(spark: SparkSession | None, fmt: TableFormats, spec: TableSpec) -> None:
    """Fail with one line when a table this spec reads has not been created yet."""
    sources = [spec.source, *spec.secondary_sources]
    for source in sources:
        if isinstance(source, TableSource | StaticSource) and not fmt.exists(spark, source.table):
            raise PipelineError(
                f"table {spec.name}: its upstream {source.table} does not exist yet; create it first with "
                f"'tributary run {source.table}', or run 'tributary run --with-upstream {spec.name}'"
            )


def _run_query(
    spark: SparkSession,
    settings: Settings,
    fmt: TableFormats,
    spec: TableSpec,
    write_batch: Any,
    clock: Stopwatch,
    headers: CsvHeaders | None = None,
) -> list[dict[str, Any]]:
    """Start the spec's bounded query, wait for it to finish, and return its progress reports."""
    try:
        with clock.stage("plan"):
            stream = source_frame(spark, settings, fmt, spec, headers)
            check_query_mode(spec, stream)  # a mode the query cannot support fails here, before anything is written
        with clock.stage("prepare_tables"):
            prepare_tables(spark, fmt, spec)
        query = (
            stream.writeStream.queryName(f"tributary_{spec.name.replace('.', '_')}")
            .foreachBatch(write_batch)
            .outputMode(spec.output_mode)
            .option("checkpointLocation", str(settings.checkpoint_for(spec.name)))
            .trigger(availableNow=True)
            .start()
        )
    except TributaryError:
        raise
    except Exception as exc:
        raise PipelineError(f"table {spec.name}: could not start its stream: {first_line(exc)}") from exc
    try:
        with clock.stage("stream"):
            query.awaitTermination()
    except StreamingQueryException as exc:
        if _LANDED_DURING_START in str(exc):
            raise file_health.LandedDuringStart(f"table {spec.name}: a file landed while the run started") from exc
        if isinstance(spec.source, FileSource):
            unreadable = find_unreadable_file(settings, spec.source)
            if unreadable:
                path, reason = unreadable
                raise PipelineError(
                    f"table {spec.name}: landing file {path} cannot be read ({reason}); fix or remove it and "
                    "re-run (nothing of the failed batch was committed)"
                ) from exc
        raise PipelineError(f"table {spec.name}: run failed: {_cause(exc)}") from exc
    finally:
        if query.isActive:
            query.stop()
    return list(query.recentProgress)


def _cause(exc: StreamingQueryException) -> str:
    """The most specific line of a streaming failure: our own error if a sink raised one."""
    text = str(exc)
    for marker in ("PipelineError: ", "TributaryError: ", "ConfigError: "):
        if marker in text:
            return text.split(marker, 1)[1].splitlines()[0]
    caused = [line for line in text.splitlines() if line.startswith("Caused by: ")]
    if caused:
        return caused[-1].removeprefix("Caused by: ").strip()
    return first_line(exc)


def _live_snapshots(settings: Settings, spec: TableSpec) -> Callable[[int], bool]:
    """Whether a snapshot id still exists in one of the Iceberg tables the spec streams from, read from the
    catalog (no JVM) on first use; where the catalog cannot be read, every snapshot counts as live."""
    from infra.sql.catalog import CatalogReader

    tables = [s.table for s in (spec.source, *spec.secondary_sources) if isinstance(s, TableSource)]

    @functools.cache
    def snapshots() -> frozenset[int] | None:
        try:
            reader = CatalogReader(settings)
            return frozenset(i for table in tables for i in reader.metadata(table).snapshots)
        except Exception:  # unreadable here (a remote warehouse, a catalog pyiceberg cannot open): keep the offset
            return None

    return lambda snapshot_id: (known := snapshots()) is None or snapshot_id in known
