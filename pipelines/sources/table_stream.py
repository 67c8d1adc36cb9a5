"""The appends of an upstream registry table (Iceberg or Delta) read as a stream, with any secondary inputs and
the late-data split (`pipelines.sources.streams`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame

from pipelines.io.landing_parse import CsvHeaders
from pipelines.sources import streams
from pipelines.sources.base import Run
from pipelines.sources.revalidate import revalidate
from pipelines.sources.stream_query import StreamedKind
from pipelines.spec.tables import TableSpec
from pipelines.write.sinks import BatchContext

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from infra.settings import Settings
    from pipelines.io.formats import DayRange, TableFormat
    from pipelines.write.ranges import RangeReport


class TableStreamKind(StreamedKind):
    """A stream of an upstream table's appends (`TableSource`)."""

    def frame(self, run: Run, headers: CsvHeaders | None) -> DataFrame:
        """The upstream's stream, watermarked and guarded, through the transform (with every secondary input)."""
        spark, spec = run.spark(), run.spec
        if streams.needs_query_frame(spec):
            return streams.query_frame(spark, run.settings, run.fmt, spec, run.checkpoint)
        table = self.source.streamed_table()
        assert table is not None
        df = run.fmt.read_stream(spark, table, run.checkpoint)
        if spec.watermark is not None:
            df = streams.guard_time_range(df, spec.watermark)
            df = df.withWatermark(spec.watermark.column, spec.watermark.delay)
        return spec.transform(df)

    def write_batch(self, ctx: BatchContext, df: DataFrame, spec: TableSpec, headers: CsvHeaders | None) -> None:
        """Late rows to the late table, the rest through the spec's sink."""
        if spec.late_table:
            streams.write_with_late_rows(ctx, df, spec)
        else:
            spec.sink.write(ctx, df)

    def caught_up(self, run: Run) -> bool:
        """Every streamed table exists and the format says the stream has read all of its appends (a missing
        upstream is not "nothing": the stream then fails with its own clear error)."""
        spark = run.running()
        return all(
            run.fmt.exists(spark, table) and run.fmt.consumer_caught_up(spark, table, run.checkpoint)
            for table in run.spec.streamed_upstreams
        )

    def reprocess(
        self,
        spark: SparkSession,
        settings: Settings,
        fmt: TableFormat,
        spec: TableSpec,
        days: DayRange,
        report: RangeReport,
    ) -> None:
        """Validate and deduplicate again the upstream rows of `days` (a validated table), replacing those days."""
        if spec.sink.reprocess_by != "revalidate":
            super().reprocess(spark, settings, fmt, spec, days, report)
        revalidate(spark, fmt, spec, days, report)
