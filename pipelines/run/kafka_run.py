"""A bounded run of a Kafka-fed table: plan the offsets on the driver, read them on the executors, and commit each
batch's rows with its end offsets in one table commit (docs/kafka.md).

Exactly once without a Spark checkpoint: the offsets a run starts from are those kept with the table's last
commit (`pipelines.io.kafka_plan`), so a run killed at any point, before or after a commit, is re-run from what the
table holds. The consumer group's offsets are committed after the table's, for lag tools only.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from confluent_kafka import KafkaException, TopicPartition
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from infra.errors import PipelineError, first_line
from infra.settings import Settings
from infra.spark import Session, running_session, started_session
from infra.stopwatch import Stopwatch
from pipelines.io.formats import TableFormats, table_format
from pipelines.io.kafka_plan import (
    LOST_PROPERTY,
    OFFSETS_PROPERTY,
    Offsets,
    batches,
    consumer,
    decode,
    encode,
    encode_ranges,
    end_offsets,
    lag,
    plan_run,
)
from pipelines.io.kafka_read import UNKNOWN_FIELDS, UNREAD_OFFSET, parse_messages, read_messages
from pipelines.run.report import RunReport
from pipelines.spec.tables import KafkaSource, TableSpec

BATCH_PROPERTY = "tributary.kafka.batch"


def group_id(table: str) -> str:
    """The consumer group whose offsets mirror the table's (for lag tools; never read back)."""
    return f"tributary.{table}"


def committed_offsets(spark: SparkSession | None, fmt: TableFormats, table: str) -> tuple[Offsets, int] | None:
    """The offsets and batch id kept with the table's last batch; ({}, -1) for a table never written; None when a
    table holding rows has none (its commits were expired): `offsets_from_rows` then reads them from the rows."""
    if not fmt.exists(spark, table):
        return {}, -1
    kept = fmt.latest_properties(spark, table, OFFSETS_PROPERTY)
    if kept is not None:
        return decode(kept[OFFSETS_PROPERTY]), int(kept[BATCH_PROPERTY])
    return None if fmt.stats(spark, table).rows else ({}, -1)


def offsets_from_rows(df: DataFrame) -> tuple[Offsets, int]:
    """The next offset of every partition the table's rows came from (each message is one row), and the last
    batch id the rows carry."""
    rows = (
        df.groupBy("_kafka_topic", "_kafka_partition")
        .agg(F.max("_kafka_offset").alias("last"), F.max("_batch_id").alias("batch"))
        .collect()
    )
    offsets = {(r[0], r[1]): r["last"] + 1 for r in rows if r[0] is not None}
    return offsets, max((r["batch"] for r in rows if r["batch"] is not None), default=-1)


def partition_lag(settings: Settings, spec: TableSpec, spark: SparkSession | None = None) -> dict[tuple[str, int], int]:
    """Messages behind per partition now (end offset minus the table's committed offset); no JVM needed when the
    table's offsets are in its commits."""
    source = spec.source
    assert isinstance(source, KafkaSource)
    fmt = table_format(settings)
    committed = committed_offsets(spark, fmt, spec.name)
    with consumer(settings.kafka, source, group_id(spec.name)) as client:
        ends = end_offsets(client, settings.kafka, source, spec.name)
    return lag(ends, committed[0] if committed is not None else {})


def run_kafka_table(
    session: Session,
    settings: Settings,
    spec: TableSpec,
    clock: Stopwatch,
    prepare: Callable[[SparkSession, TableFormats, TableSpec], None],
) -> RunReport:
    """Read everything the source's partitions hold beyond the table's offsets, in batches; commit, stop, report."""
    started = time.perf_counter()
    source = spec.source
    assert isinstance(source, KafkaSource)
    fmt = table_format(settings)
    report = RunReport(table=spec.name, trigger="kafka")
    spark = running_session(session)
    with clock.stage("checks"):
        known = committed_offsets(spark, fmt, spec.name)
        if known is None:
            spark = started_session(session, settings)
            known = offsets_from_rows(fmt.read(spark, spec.name))
        committed, last_batch = known
        with consumer(settings.kafka, source, group_id(spec.name)) as client:
            ends = end_offsets(client, settings.kafka, source, spec.name)
        plan = plan_run(ends, committed, source, spec.name)
    metrics: Counter[str] = Counter(kafka_partitions=len(ends))
    position = {**committed, **plan.starts}
    if plan.ranges or plan.lost or not fmt.exists(spark, spec.name):
        spark = started_session(session, settings)
        with clock.stage("prepare_tables"):
            prepare(spark, fmt, spec)
    if plan.ranges or plan.lost:
        metrics["kafka_offsets_lost"] = sum(r.size for r in plan.lost)
        topics = sorted({topic for topic, _ in ends})
        for i, chunk in enumerate(batches(plan.ranges, source.max_offsets_per_batch) or [[]]):
            batch_id = last_batch + 1 + i
            position.update({(r.topic, r.partition): r.end for r in chunk})
            properties = {OFFSETS_PROPERTY: encode(position), BATCH_PROPERTY: str(batch_id)}
            if i == 0 and plan.lost:
                properties[LOST_PROPERTY] = encode_ranges(plan.lost)
            with clock.stage("batch.write"):
                rows = _batch_rows(spark, settings, spec, chunk, topics, batch_id)
                try:
                    added = fmt.append(rows, spec.name, f"kafka:{spec.name}", batch_id, properties)
                except Exception as exc:
                    raise _read_failure(spec.name, batch_id, exc) from None
            report.batches += 1
            report.data_batches += 1 if chunk else 0
            report.rows_in += added
            metrics["kafka_offsets_read"] += sum(r.size for r in chunk)
            metrics[f"rows_written:{spec.name}"] += added
        metrics["kafka_group_committed"] = int(_commit_group(settings, source, spec.name, position))
    else:
        report.skipped = True
    with consumer(settings.kafka, source, group_id(spec.name)) as client:
        behind = lag(end_offsets(client, settings.kafka, source, spec.name), position)
    metrics["kafka_lag"] = sum(behind.values())
    metrics.update({f"kafka_lag_{topic}_{partition}": n for (topic, partition), n in sorted(behind.items())})
    report.metrics = dict(metrics)
    with clock.stage("stats"):
        report.tables = {out.name: fmt.stats(spark, out.name) for out in spec.outputs()}
    report.seconds = round(time.perf_counter() - started, 3)
    if report.seconds and report.rows_in:
        report.processed_rows_per_second = round(report.rows_in / report.seconds, 1)
    return report


def _batch_rows(
    spark: SparkSession, settings: Settings, spec: TableSpec, chunk: list, topics: list[str], batch_id: int
) -> DataFrame:
    """The table rows of one batch: messages read on the executors, parsed, through the spec's function."""
    source = spec.source
    assert isinstance(source, KafkaSource)
    names = spec.output.schema.names
    if not chunk:
        return spark.createDataFrame([], spec.output.schema)
    rows = spec.transform(
        parse_messages(read_messages(spark, settings.kafka, source, chunk, group_id(spec.name)), source, topics)
    )
    if "_batch_id" in names:
        rows = rows.withColumn("_batch_id", F.lit(batch_id).cast("long"))
    return rows.select(*names)


def _read_failure(table: str, batch_id: int, exc: Exception) -> PipelineError:
    """One line for a batch that failed on the executors (or in the commit): nothing of it was written."""
    text = str(exc)
    if UNKNOWN_FIELDS in text:
        detail = text.split(f"{UNKNOWN_FIELDS}: ", 1)[1].splitlines()[0].strip()
        detail += " the schema does not declare (schema_evolution='fail'); declare them, or use 'rescue'"
        return PipelineError(f"table {table}: {detail} (nothing of batch {batch_id} was written)")
    unread = UNREAD_OFFSET.search(text)
    if unread is not None:
        where = f"topic {unread['topic']} partition {unread['partition']}: " if unread["topic"] else ""
        return PipelineError(
            f"table {table}: {where}offset {unread['offset']} could not be read (gone from the brokers since the "
            f"run was planned, or not answered in time); run again to plan anew (nothing of batch {batch_id} was "
            "written)"
        )
    causes = [line.split("Exception: ", 1)[1] for line in text.splitlines() if "Exception: " in line]
    cause = causes[0] if causes else first_line(exc)
    return PipelineError(f"table {table}: batch {batch_id} failed: {cause} (nothing of it was written)")


def _commit_group(settings: Settings, source: KafkaSource, table: str, position: Offsets) -> bool:
    """Mirror the table's offsets into the consumer group (for lag tools); False when the brokers refused."""
    offsets = [TopicPartition(topic, partition, offset) for (topic, partition), offset in sorted(position.items())]
    try:
        with consumer(settings.kafka, source, group_id(table)) as client:
            client.commit(offsets=offsets, asynchronous=False)
    except KafkaException:
        return False
    return True
