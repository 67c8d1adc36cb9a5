"""Reprocessing a landed-files table (`tributary`'s reprocess, `pipelines.ops.reprocess`): the landing files
whose rows were ingested on the range's days are read again (from the archive when they were moved there), each
keeping its original `_ingested_at`, batch id and rejection, and replace those days in one commit."""

from __future__ import annotations

from typing import cast

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from infra.errors import ConfigError, PipelineError
from infra.paths import local_path
from infra.settings import Settings
from pipelines.io.archive import archived_path
from pipelines.io.formats import DayRange, TableFormat
from pipelines.io.landing_parse import REJECTED_COLUMN, file_name
from pipelines.io.sources import LINEAGE_COLUMNS, batch_read_files
from pipelines.spec.sources import FileSource
from pipelines.spec.tables import TableSpec
from pipelines.write.ranges import RangeReport, replace_range
from pipelines.write.sinks import AppendSink


def reread_files(
    spark: SparkSession, settings: Settings, fmt: TableFormat, spec: TableSpec, days: DayRange, report: RangeReport
) -> None:
    """Replace the days of `days` with the rows of the files first ingested on them, read again."""
    source, sink = cast(FileSource, spec.source), cast(AppendSink, spec.sink)
    condition = days.condition()
    missing = [c for c in LINEAGE_COLUMNS if c not in spec.output.schema.names]
    if missing:
        raise ConfigError(f"table {spec.name}: reprocess needs the lineage columns {missing} in the table")
    per_file = (
        fmt.read(spark, spec.name)
        .filter(condition)
        .groupBy("_source_file")
        .agg(
            F.min("_ingested_at").alias("_ingested_at"),
            *([F.min(sink.batch_id_column).alias(sink.batch_id_column)] if sink.batch_id_column else []),
            # A file's rejection was decided when it was first read; a re-read keeps it.
            *([F.first(REJECTED_COLUMN).alias(REJECTED_COLUMN)] if REJECTED_COLUMN in spec.output.schema.names else []),
        )
    )
    files = [r._source_file for r in per_file.collect()]
    reads, archived = [], {}
    for uri in files:
        path = local_path(uri)
        if path is not None and not path.is_file():
            copy = archived_path(settings, source, path)
            if copy is None:
                raise PipelineError(
                    f"table {spec.name}: cannot reprocess {report.start}..{report.end}: landing file {path}, "
                    "ingested in that range, no longer exists; restore it or choose a range that does not include it"
                )
            archived[copy.name] = uri
            uri = str(copy)
        reads.append(uri)
    report.extra["files_reread"] = len(files)
    if not files:
        rows = spark.createDataFrame([], spec.output.schema)
    else:
        read = batch_read_files(spark, source, reads)
        if archived:  # rows keep the landing path they were first read from
            landed_as = F.create_map(*[F.lit(x) for item in archived.items() for x in item])
            read = read.withColumn(
                "_source_file", F.coalesce(landed_as[file_name(F.col("_source_file"))], F.col("_source_file"))
            )
        rows = spec.transform(read.join(F.broadcast(per_file), "_source_file")).filter(condition)
    report.snapshot_id = replace_range(fmt, spec.output, rows, days, "reprocess")
