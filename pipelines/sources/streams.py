"""Query inputs beyond one source: secondary streams, reference tables, and the late-data split.

Late data. A watermarked query drops rows that arrive too late. Tributary diverts exactly those instead: when a
run starts it reads the watermark Spark judges the run's first batch against (the previous batch's), plans the
transform once to learn what each stateful operator judges (a window's end, a session's end, a row's time:
pipelines.spec.plans), and splits every watermarked input of the query in two. Rows Spark would keep (or
without event time) feed the query; the rest go, unchanged and as JSON, to the spec's `late_table`. Both
halves are one streaming query (a union), so they share a checkpoint, a micro-batch and its idempotent
commit. Rows Spark still drops itself (closed windows of a sliding-window row that reached an open one; a
second data batch in one run) are counted as `rows_dropped_by_watermark`. See docs/streaming.md.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from infra.settings import Settings
from infra.spark_functions import with_batch_number
from pipelines.io.checkpoints import late_events_watermark_ms
from pipelines.io.formats import TableFormat
from pipelines.spec.plans import late_bounds
from pipelines.spec.rules import time_range_condition
from pipelines.spec.sources import Watermark
from pipelines.spec.tables import OutputTable, TableSpec
from pipelines.write.sinks import BatchContext

TIME_GUARD = "tributary_time_guard"
OUT_OF_RANGE_METRIC = "rows_out_of_range"


def in_time_range(watermark: Watermark) -> Column:
    """TRUE for rows whose event time may move the watermark: NULL, or within the watermark's plausible range.

    `current_timestamp()` in a streaming query is the batch's time, which Spark logs with the batch and reuses
    when it replays it, so a replay sorts rows exactly as the first attempt did.
    """
    condition = time_range_condition(watermark.column, watermark.earliest, watermark.max_future, "current_timestamp()")
    return F.coalesce(F.expr(condition), F.lit(False))


def guard_time_range(df: DataFrame, watermark: Watermark, name: str = "") -> DataFrame:
    """Leave out (and count, as the query's observed `rows_out_of_range`) rows outside the plausible range.

    `name` tells the inputs of one query apart (observed metric names must be unique within a query).
    """
    flag = "_tributary_out_of_range"
    # Observed metrics may not hold the batch time itself: flag rows in a projection first.
    flagged = df.withColumn(flag, (~in_time_range(watermark)).cast("long"))
    metric = F.coalesce(F.sum(flag), F.lit(0)).alias(OUT_OF_RANGE_METRIC)
    observed = flagged.observe(f"{TIME_GUARD}{name}", metric)
    return observed.filter(F.col(flag) == 0).drop(flag)


OUT_COLUMN = "_out"
LATE_COLUMN = "_late"
LATE_SCHEMA = StructType(
    [
        StructField("source", StringType()),
        StructField("event_time", TimestampType()),
        StructField("watermark", TimestampType()),
        StructField("record", StringType()),
        StructField("_batch_id", LongType()),
    ]
)


def late_output(name: str) -> OutputTable:
    """The table that receives a spec's late rows (one schema for every spec: the row is kept as JSON)."""
    return OutputTable(name, LATE_SCHEMA, partition_by=("days(watermark)",))


def needs_query_frame(spec: TableSpec) -> bool:
    """Whether the spec needs more than one plain source (secondary inputs or a late-data split)."""
    return bool(spec.secondary_sources) or spec.late_table is not None


def source_copies(spec: TableSpec) -> int:
    """How often the query reads each source: the late split reads every stream once per half."""
    return 2 if spec.late_table else 1


def query_frame(
    spark: SparkSession, settings: Settings, fmt: TableFormat, spec: TableSpec, checkpoint: Path
) -> DataFrame:
    """The spec's streaming DataFrame (the query at `checkpoint`): its transform over all inputs, plus late rows when
    it has a late table.

    With a late table the result has two struct columns, `_out` (a transform row) and `_late` (a late-table row);
    exactly one of them is set per row. `write_batch` splits them.
    """
    inputs = _inputs(spark, settings, fmt, spec, checkpoint)
    if not spec.late_table:
        guarded = [
            df if wm is None else _watermarked(guard_time_range(df, wm, f"_{i}"), wm)
            for i, (_, df, wm) in enumerate(inputs)
        ]
        return spec.transform(*guarded)
    watermark_ms = late_events_watermark_ms(settings.checkpoint_for(spec.name))
    watermark = F.timestamp_millis(F.lit(watermark_ms))
    plausible = [df if wm is None else df.filter(~_implausible(wm)) for _, df, wm in inputs]
    # Plan the transform once to read which rows its stateful operators would drop (pipelines.spec.plans).
    probe = spec.transform(*[_watermarked(df, wm) for df, (_, _, wm) in zip(plausible, inputs, strict=True)])
    bounds = late_bounds(probe, plausible, [None if wm is None else wm.column for _, _, wm in inputs])
    fed: list[DataFrame] = []
    late_parts: list[DataFrame] = []
    for (name, df, wm), judged in zip(inputs, bounds, strict=True):
        if wm is None:  # a static table, or a stream without event time
            fed.append(df)
            continue
        dropped = (F.greatest(*judged) if len(judged) > 1 else judged[0]) <= watermark if judged else F.lit(False)
        diverted = _implausible(wm) | F.coalesce(dropped, F.lit(False))
        late_parts.append(_late_rows(df.filter(diverted), name, wm.column, watermark_ms))
        fed.append(_watermarked(df.filter(~diverted), wm))
    out = spec.transform(*fed)
    late_type = StructType(LATE_SCHEMA.fields[:-1])
    combined = out.select(F.struct(*out.columns).alias(OUT_COLUMN), F.lit(None).cast(late_type).alias(LATE_COLUMN))
    for late in late_parts:
        combined = combined.unionByName(
            late.select(F.lit(None).cast(out.schema).alias(OUT_COLUMN), F.struct(*late.columns).alias(LATE_COLUMN))
        )
    return combined


def _implausible(watermark: Watermark) -> Column:
    """Rows with an event time that would move the watermark implausibly (they go to the late table)."""
    return F.col(watermark.column).isNotNull() & ~in_time_range(watermark)


def _watermarked(df: DataFrame, watermark: Watermark | None) -> DataFrame:
    return df if watermark is None else df.withWatermark(watermark.column, watermark.delay)


def _inputs(
    spark: SparkSession, settings: Settings, fmt: TableFormat, spec: TableSpec, checkpoint: Path
) -> list[tuple[str, DataFrame, Watermark | None]]:
    """(name, DataFrame, watermark) of the main source and each secondary source, in transform argument order:
    streamed tables as streams, reference tables read whole (no watermark)."""
    main = spec.source.streamed_table()
    assert main is not None  # only a table stream has secondary inputs (pipelines.spec.modes)
    out = [(main, fmt.read_stream(spark, main, checkpoint), spec.watermark)]
    for source in spec.secondary_sources:
        streamed, table = source.streamed_table(), source.read_table()
        if streamed is not None:
            out.append((streamed, fmt.read_stream(spark, streamed, checkpoint), source.watermark))
        elif table is not None:
            out.append((table, fmt.read(spark, table), None))
    return out


def _late_rows(df: DataFrame, source: str, column: str, watermark_ms: int) -> DataFrame:
    return df.select(
        F.lit(source).alias("source"),
        F.col(column).cast("timestamp").alias("event_time"),
        F.timestamp_millis(F.lit(watermark_ms)).alias("watermark"),
        F.to_json(F.struct(*[F.col(c) for c in df.columns])).alias("record"),
    )


def write_with_late_rows(ctx: BatchContext, df: DataFrame, spec: TableSpec) -> None:
    """Split one micro-batch of a late-split query: late rows to the late table, the rest to the spec's sink."""
    batch = df.persist()
    try:
        counts = batch.agg(F.count(OUT_COLUMN).alias("out"), F.count(LATE_COLUMN).alias("late")).collect()[0]
        if counts["late"]:
            late = batch.filter(F.col(LATE_COLUMN).isNotNull()).select(f"{LATE_COLUMN}.*")
            added = ctx.append(with_batch_number(late, "_batch_id", ctx.batch_id), spec.late_table)
            ctx.metrics["rows_late"] += added
        if counts["out"]:
            spec.sink.write(ctx, batch.filter(F.col(OUT_COLUMN).isNotNull()).select(f"{OUT_COLUMN}.*"))
    finally:
        batch.unpersist()
