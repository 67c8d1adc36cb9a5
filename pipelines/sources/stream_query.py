"""Kinds read by one bounded Spark streaming query per run (landed files, table streams): the query's life.

Every such source runs bounded with availableNow: everything available when the query starts (split by the
source's per-batch limit), then Spark's no-data batch when the watermark moved (it emits the windows, sessions and
join rows the watermark closed, and later rows are judged against it), then stop. Iceberg's stream implements it
from 1.11; its initial offset is moved to the committed end before each run (`pin_initial_offsets`), since its
availableNow plan walks from there and fails once maintenance has expired the stream's first snapshot.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from infra.errors import PipelineError, TributaryError, first_line
from infra.settings import Settings
from pipelines.io.checkpoints import mark_finished, pin_initial_offsets, plan_owed_no_data_batch
from pipelines.io.landing_parse import CsvHeaders
from pipelines.sources import file_health, progress, streams
from pipelines.sources.base import Run, SourceKind
from pipelines.sources.report import count_rows_in, fill_from_progress
from pipelines.spec.modes import check_query_mode
from pipelines.spec.tables import TableSpec
from pipelines.write.sinks import ROWS_IN, BatchContext

# A CSV file that lands while a run starts has no header in the run's plan: the query restarts to read it.
_HEADER_RESTARTS = 3
_LANDED_DURING_START = file_health.LandedDuringStart.__name__


def write_micro_batch(
    ctx: BatchContext, df: DataFrame, kind: StreamedKind, spec: TableSpec, headers: CsvHeaders | None
) -> None:
    """Write one micro-batch of `spec`'s query through its source kind (the fault tests wrap this call)."""
    kind.write_batch(ctx, df, spec, headers)


class StreamedKind(SourceKind):
    """A source read by a streaming query with a checkpoint; subclasses give the frame and the batch writer."""

    def frame(self, run: Run, headers: CsvHeaders | None) -> DataFrame:
        """The table's streaming input after its transform."""
        raise NotImplementedError

    def write_batch(self, ctx: BatchContext, df: DataFrame, spec: TableSpec, headers: CsvHeaders | None) -> None:
        """Write one micro-batch of the query."""
        raise NotImplementedError

    def headers(self, run: Run) -> CsvHeaders | None:
        """What the query needs to know of the landed files before it is planned (CSV headers)."""
        return None

    def caught_up(self, run: Run) -> bool:
        """Whether the query's inputs hold nothing it has not read."""
        raise NotImplementedError

    def explain_failure(self, run: Run) -> str | None:
        """One line on why the query failed when the source can tell (an unreadable file), else None."""
        return None

    def count_rows(self, run: Run) -> None:
        """Correct the rows the query counted in, where the source or the sink knows better. Spark counts a
        batch's rows each time the batch is read, and a validating sink reads its batch more than once: the rows
        it counted (`ROWS_IN`) are the rows in."""
        counted = run.metrics.get(ROWS_IN)
        if counted is not None:
            count_rows_in(run.report, counted, run.report.data_batches)

    def rows_so_far(self, run: Run, done: list[dict[str, Any]]) -> int:
        """The rows in of the batches `done` so far, for the live progress line: as `count_rows` counts them."""
        if ROWS_IN in run.metrics:
            return run.metrics[ROWS_IN]
        return sum(int(p.get("numInputRows", 0)) for p in done) // streams.source_copies(run.spec)

    def nothing_to_read(self, run: Run) -> bool:
        """Owed batches planned first (a no-data batch, an expired first snapshot); then whether all was read."""
        plan_owed_no_data_batch(run.checkpoint)
        pin_initial_offsets(run.checkpoint, _live_snapshots(run.settings, run.spec))
        return self.caught_up(run)

    def read_batches(self, run: Run) -> None:
        """Run the bounded query (again, when a CSV file landed while it started) and fill the report."""
        spark = run.spark()
        spec = run.spec
        progress: list[dict[str, Any]] = []
        stage_bytes = run.settings.stage_landing_mb << 20
        for attempt in range(_HEADER_RESTARTS + 1):
            headers = self.headers(run)

            def write_batch(df: DataFrame, batch_id: int, headers: CsvHeaders | None = headers) -> None:
                ctx = BatchContext(
                    spark,
                    run.fmt,
                    spec.name,
                    run.checkpoint,
                    batch_id,
                    run.metrics,
                    run.files,
                    run.clock,
                    stage_bytes,
                    run.settings.home,
                    spec.expectations,
                    run.fence,
                )
                with run.clock.stage("batch.write"):
                    write_micro_batch(ctx, df, self, spec, headers)

            try:
                progress.extend(self._run_query(run, spark, write_batch, headers))
                break
            except file_health.LandedDuringStart:
                if attempt == _HEADER_RESTARTS:
                    raise
        mark_finished(run.checkpoint)
        fill_from_progress(run.report, progress, streams.source_copies(spec))
        self.count_rows(run)

    def _run_query(
        self, run: Run, spark: SparkSession, write_batch: Callable[[DataFrame, int], None], headers: CsvHeaders | None
    ) -> list[dict[str, Any]]:
        """Start the bounded query, wait for it to finish, and return its progress reports."""
        spec = run.spec
        try:
            with run.clock.stage("plan"):
                stream = self.frame(run, headers)
                check_query_mode(spec, stream)  # a mode the query cannot support fails here, before any write
            with run.clock.stage("prepare_tables"):
                self.prepare_tables(spark, run.fmt, spec)
            query = (
                stream.writeStream.queryName(f"tributary_{spec.name.replace('.', '_')}")
                .foreachBatch(write_batch)
                .outputMode(spec.output_mode)
                .option("checkpointLocation", str(run.checkpoint))
                .trigger(availableNow=True)
                .start()
            )
        except TributaryError:
            raise
        except Exception as exc:
            raise PipelineError(f"table {spec.name}: could not start its stream: {first_line(exc)}") from exc
        try:
            with run.clock.stage("stream"):
                while not query.awaitTermination(1):  # a progress report about once a second
                    done = _progress(query)
                    progress.progressed(spec.name, len(done), self.rows_so_far(run, done))
        except StreamingQueryException as exc:
            if _LANDED_DURING_START in str(exc):
                raise file_health.LandedDuringStart(f"table {spec.name}: a file landed while the run started") from exc
            explained = self.explain_failure(run)
            if explained:
                raise PipelineError(f"table {spec.name}: {explained}") from exc
            cause = _cause(exc)
            if cause.startswith(f"table {spec.name}: "):  # a sink's own error, which names the table already
                raise PipelineError(cause) from exc
            raise PipelineError(f"table {spec.name}: run failed: {cause}") from exc
        finally:
            if query.isActive:
                query.stop()
        return _progress(query)


def _progress(query: StreamingQuery) -> list[dict[str, Any]]:
    """The query's progress reports as plain JSON objects (Spark 4's report objects hold its observed metrics as
    Rows, which have no `get`)."""
    return [json.loads(p.json) for p in query.recentProgress]


_SPARK_ERROR = re.compile(r"^\s*pyspark\.errors\.exceptions\.\S+: (\[[A-Z_.]+\] .*)$")


def _cause(exc: StreamingQueryException) -> str:
    """The most specific line of a streaming failure: our own error if a sink raised one."""
    text = str(exc)
    for marker in ("PipelineError: ", "TributaryError: ", "ConfigError: "):
        if marker in text:
            return text.split(marker, 1)[1].splitlines()[0]
    # An error the batch's own query raised in the sink (a value the function cannot cast in an ANSI session):
    # the Spark error class line of the Python traceback the stream carries.
    classed = [m.group(1) for m in map(_SPARK_ERROR.match, text.splitlines()) if m]
    if classed:
        return classed[-1].strip()
    caused = [line for line in text.splitlines() if line.startswith("Caused by: ")]
    if caused:
        return caused[-1].removeprefix("Caused by: ").strip()
    return first_line(exc)


def _live_snapshots(settings: Settings, spec: TableSpec) -> Callable[[int], bool]:
    """Whether a snapshot id still exists in one of the Iceberg tables the spec streams from, read from the
    catalog (no JVM) on first use; where the catalog cannot be read, every snapshot counts as live."""
    from infra.sql.catalog import CatalogReader

    tables = spec.streamed_upstreams

    @functools.cache
    def snapshots() -> frozenset[int] | None:
        try:
            reader = CatalogReader(settings)
            return frozenset(i for table in tables for i in reader.metadata(table).snapshots)
        except Exception:  # unreadable here (a remote warehouse, a catalog pyiceberg cannot open): keep the offset
            return None

    return lambda snapshot_id: (known := snapshots()) is None or snapshot_id in known
