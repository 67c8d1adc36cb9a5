"""A bounded run of a Kafka-fed table: plan the offsets on the driver, read them on the executors, and commit each
batch's rows with its end offsets in one table commit (docs/kafka.md).

Exactly once without a Spark checkpoint: the offsets a run starts from are those kept with the table's last
commit (`pipelines.io.kafka_plan`), so a run killed at any point, before or after a commit, is re-run from what the
table holds. The consumer group's offsets are committed after the table's, for lag tools only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from confluent_kafka import KafkaException, TopicPartition
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from infra.errors import PipelineError, first_line
from infra.settings import Settings
from infra.spark_functions import with_batch_number
from pipelines.io.formats import TableFormats, table_format
from pipelines.io.kafka_plan import (
    LOST_PROPERTY,
    OFFSETS_PROPERTY,
    Offsets,
    Plan,
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
from pipelines.io.landing_parse import KAFKA_LINEAGE, LANDED_LINEAGE
from pipelines.sources import progress
from pipelines.sources.base import Accounting, Run, SourceKind
from pipelines.sources.files import LANDING_CHECKS
from pipelines.sources.kafka_offsets import flow_key, of_topics, offsets_vs_bronze
from pipelines.spec.expectations import unique
from pipelines.spec.sources import KafkaSource
from pipelines.spec.tables import MAIN_FLOW, TableSpec

if TYPE_CHECKING:
    from pyspark.sql.types import StructField

    from pipelines.spec.expectations import Expectation

BATCH_PROPERTY = "tributary.kafka.batch"


def group_id(table: str) -> str:
    """The consumer group whose offsets mirror the table's (for lag tools; never read back)."""
    return f"tributary.{table}"


def committed_offsets(
    spark: SparkSession | None, fmt: TableFormats, table: str, flow: str = MAIN_FLOW
) -> tuple[Offsets, int] | None:
    """The offsets and batch id kept with the last batch of the table's flow `flow`; ({}, -1) for a table never
    written; None when a table holding rows has none (its commits were expired): `offsets_from_rows` then reads
    them from the rows."""
    if not fmt.exists(spark, table):
        return {}, -1
    offsets, batch = flow_key(OFFSETS_PROPERTY, flow), flow_key(BATCH_PROPERTY, flow)
    kept = fmt.latest_properties(spark, table, offsets)
    if kept is not None:
        return decode(kept[offsets]), int(kept[batch])
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


class KafkaKind(SourceKind):
    """Messages of Kafka topics (`KafkaSource`): offsets planned on the driver, read on the executors, each batch's
    rows committed with its end offsets."""

    source: KafkaSource
    trigger: ClassVar[str] = "kafka"
    has_lag: ClassVar[bool] = True

    def __init__(self, source: KafkaSource) -> None:
        super().__init__(source)
        self.plan: Plan | None = None
        self.ends: Offsets = {}
        self.position: Offsets = {}
        self.last_batch = -1

    def lineage(self) -> tuple[StructField, ...]:
        """The landed time, then the message's topic, partition, offset, key and time."""
        return (*LANDED_LINEAGE, *KAFKA_LINEAGE)

    def landing_checks(self) -> tuple[Expectation, ...]:
        """Every landed row names its time and batch."""
        return LANDING_CHECKS

    def row_checks(self) -> tuple[Expectation, ...]:
        """Each message is in the table once."""
        return (unique("_kafka_topic", "_kafka_partition", "_kafka_offset"),)

    def check(self, run: Run) -> None:
        """Plan the run: the offsets kept with the table's last commit up to the brokers' end offsets now."""
        spec = run.spec
        known = committed_offsets(run.running(), run.fmt, spec.name, run.flow)
        if known is None:
            known = offsets_from_rows(run.fmt.read(run.spark(), spec.name).filter(of_topics(self.source)))
        committed, self.last_batch = known
        with consumer(run.settings.kafka, self.source, group_id(spec.name)) as client:
            self.ends = end_offsets(client, run.settings.kafka, self.source, spec.name)
        self.plan = plan_run(self.ends, committed, self.source, spec.name)
        self.position = {**committed, **self.plan.starts}
        run.metrics["kafka_partitions"] = len(self.ends)

    def nothing_to_read(self, run: Run) -> bool:
        """No offsets to read and none lost since the last commit."""
        assert self.plan is not None
        return not (self.plan.ranges or self.plan.lost)

    def read_batches(self, run: Run) -> None:
        """Each batch of at most `max_offsets_per_batch` messages is one table commit with its end offsets."""
        assert self.plan is not None
        spec, fmt, plan, report = run.spec, run.fmt, self.plan, run.report
        spark = run.spark()
        with run.clock.stage("prepare_tables"):
            self.prepare_tables(spark, fmt, spec)
        run.metrics["kafka_offsets_lost"] = sum(r.size for r in plan.lost)
        topics = sorted({topic for topic, _ in self.ends})
        for i, chunk in enumerate(batches(plan.ranges, self.source.max_offsets_per_batch) or [[]]):
            batch_id = self.last_batch + 1 + i
            self.position.update({(r.topic, r.partition): r.end for r in chunk})
            properties = {
                flow_key(OFFSETS_PROPERTY, run.flow): encode(self.position),
                flow_key(BATCH_PROPERTY, run.flow): str(batch_id),
            }
            if i == 0 and plan.lost:
                properties[flow_key(LOST_PROPERTY, run.flow)] = encode_ranges(plan.lost)
            with run.clock.stage("batch.write"):
                rows = _batch_rows(spark, run.settings, spec, self.source, chunk, topics, batch_id)
                try:
                    run.fence()
                    added = fmt.append(rows, spec.name, flow_key(f"kafka:{spec.name}", run.flow), batch_id, properties)
                except Exception as exc:
                    raise _read_failure(spec.name, batch_id, exc) from None
            report.batches += 1
            report.data_batches += 1 if chunk else 0
            report.rows_in += added
            run.metrics["kafka_offsets_read"] += sum(r.size for r in chunk)
            run.metrics[f"rows_written:{spec.name}"] += added
            progress.progressed(spec.name, report.batches, report.rows_in)

    def after_run(self, run: Run, skipped: bool) -> None:
        """Mirror the offsets into the consumer group (when batches ran), then measure the lag left."""
        settings, name = run.settings, run.spec.name
        if not skipped:
            run.metrics["kafka_group_committed"] = int(_commit_group(settings, self.source, name, self.position))
        with consumer(settings.kafka, self.source, group_id(name)) as client:
            behind = lag(end_offsets(client, settings.kafka, self.source, name), self.position)
        run.metrics["kafka_lag"] = sum(behind.values())
        run.metrics.update({f"kafka_lag_{topic}_{partition}": n for (topic, partition), n in sorted(behind.items())})

    def accounting(self, spark: SparkSession, settings: Settings, spec: TableSpec, flow: str) -> Accounting:
        """Each committed offset is in the table once."""
        return offsets_vs_bronze(spark, settings, spec, self.source, flow)

    def partition_lag(self, settings: Settings, spec: TableSpec, flow: str) -> dict[tuple[str, int], int]:
        """Messages behind per partition now; no JVM needed when the table's offsets are in its commits."""
        fmt = table_format(settings)
        committed = committed_offsets(None, fmt, spec.name, flow)
        with consumer(settings.kafka, self.source, group_id(spec.name)) as client:
            ends = end_offsets(client, settings.kafka, self.source, spec.name)
        return lag(ends, committed[0] if committed is not None else {})


def _batch_rows(
    spark: SparkSession,
    settings: Settings,
    spec: TableSpec,
    source: KafkaSource,
    chunk: list,
    topics: list[str],
    batch_id: int,
) -> DataFrame:
    """The table rows of one batch: messages read on the executors, parsed, through the spec's function."""
    names = spec.output.schema.names
    if not chunk:
        return spark.createDataFrame([], spec.output.schema)
    rows = spec.transform(
        parse_messages(read_messages(spark, settings.kafka, source, chunk, group_id(spec.name)), source, topics)
    )
    if "_batch_id" in names:
        rows = with_batch_number(rows, "_batch_id", batch_id)
    return rows.select(*names)


def _read_failure(table: str, batch_id: int, exc: Exception) -> PipelineError:
    """One line for a batch that failed on the executors (or in the commit): nothing of it was written."""
    text = str(exc)
    if UNKNOWN_FIELDS in text:
        # Spark 4 ends a raised error's message with its SQLSTATE (P0001)
        detail = text.split(f"{UNKNOWN_FIELDS}: ", 1)[1].splitlines()[0].split(" SQLSTATE: ")[0].strip()
        detail += " the schema does not declare (schema_evolution='fail'); declare them, or use 'rescue'"
        return PipelineError(f"table {table}: {detail} (nothing of batch {batch_id} was written)")
    unread = UNREAD_OFFSET.search(text)
    if unread is not None:
        topic, partition = unread["topic"] or unread["tp"], unread["partition"] or unread["tpn"]
        where = f"topic {topic} partition {partition}: " if topic else ""
        offset = unread["offset"] or unread["first"]
        return PipelineError(
            f"table {table}: {where}offset {offset} could not be read (gone from the brokers since the "
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
