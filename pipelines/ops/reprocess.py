"""Reprocessing: re-derive a range of days of a streaming table from its input and replace it in one commit.

The table's source kind re-reads its input (`SourceKind.reprocess`) as its write strategy says
(`Sink.reprocess_by`): a bronze table (landed files, appended) re-reads the landing files it ingested on those
days, keeping each file's original `_ingested_at` and batch id; a silver table (validated and deduplicated)
re-validates the upstream rows whose event time falls on those days, and replaces their quarantined rows too. The
table's checkpoint is left alone: it still points after everything the stream has read, so the next incremental
run neither re-adds nor skips rows. The commit is an *overwrite*, which downstream streams skip
(`TableFormat.read_stream`): recompute downstream days with a backfill.
"""

from __future__ import annotations

import functools
import time
from datetime import date

from pyspark.sql import SparkSession

from infra.errors import ConfigError
from infra.settings import Settings
from pipelines.io.formats import table_format
from pipelines.run import run_log
from pipelines.run.locks import table_lock
from pipelines.sources.kinds import kind_of, prepare_tables
from pipelines.spec.registry import Registry
from pipelines.write.ranges import RangeReport, check_range, day_column, day_range


def reprocess(
    spark: SparkSession, settings: Settings, registry: Registry, table: str, start: date, end: date
) -> RangeReport:
    """Re-derive the days start..end of a streaming table from its input and replace them; checkpoints stay as they are.

    Bronze (a file source): the landing files whose rows were ingested on those days are read again, keeping each
    file's original `_ingested_at` and batch id. Silver (a table source validated and deduplicated by key): the
    upstream rows whose event time falls on those days are validated and deduplicated again; their quarantined
    rows are replaced too.
    """
    with table_lock(settings, table, settings.lock_wait_seconds):
        work = functools.partial(_reprocess, spark, settings, registry, table, start, end)
        return run_log.logged_operation(settings, table, "reprocess", work)


def _reprocess(
    spark: SparkSession, settings: Settings, registry: Registry, table: str, start: date, end: date
) -> RangeReport:
    spec = registry.get(table)
    check_range(table, start, end)
    flows = spec.all_flows()
    if len(flows) > 1:  # a kind re-reads its own source, and would replace the days' rows of every flow
        raise ConfigError(
            f"table {table} is fed by {len(flows)} flows ({', '.join(f.name for f in flows)}); reprocess re-reads "
            "one source: full-refresh the table instead, which reads every flow again"
        )
    column = day_column(spec.output)
    fmt = table_format(settings)
    prepare_tables(spark, fmt, spec)
    started = time.perf_counter()
    days = day_range(spec.output, column, start, end)
    report = RangeReport(spec.name, "reprocess", start, end)
    report.rows_before = fmt.read(spark, spec.name).filter(days.condition()).count()
    kind_of(spec.source).reprocess(spark, settings, fmt, spec, days, report)
    report.rows_after = fmt.read(spark, spec.name).filter(days.condition()).count()
    report.seconds = round(time.perf_counter() - started, 3)
    return report
