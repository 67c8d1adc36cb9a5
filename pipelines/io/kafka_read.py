"""Reading planned Kafka offset ranges with Spark's Kafka connector, and parsing messages into landed rows.

A batch's ranges are read by Spark's own Kafka source (`spark-sql-kafka-0-10`) as a bounded batch read, from each
range's start to its end (`startingOffsets`/`endingOffsets`), one task per partition: the offsets stay planned
and committed by Tributary (`pipelines.io.kafka_plan`), never by a consumer group or a Spark checkpoint. Values are
parsed like landed lines (`pipelines.io.landing_parse`): a value that is not a JSON object (or a CSV line of the
wrong shape, or not UTF-8) is kept whole in `_corrupt_record`, an empty value (a tombstone) too, and unknown fields
go to `_rescued_data`. A CSV value is matched to the schema's columns in order: a message has no header.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from infra.kafka import KafkaSettings
from infra.spark_functions import batch_time
from pipelines.io.kafka_plan import Range
from pipelines.io.landing_parse import (
    CORRUPT_COLUMN,
    KAFKA_LINEAGE,
    REJECTED_COLUMN,
    RESCUED_COLUMN,
    CsvHeaders,
    parse_csv_lines,
    parse_json_lines,
    unknown_fields,
    utf8_text,
)
from pipelines.spec.sources import FileSource, KafkaSource

# Failures raised on an executor start with these words, so the runner can turn them into one line.
UNKNOWN_FIELDS = "TributaryKafkaUnknownFields"
# How Spark's Kafka reader reports an offset it could not fetch (failOnDataLoss, or a poll that timed out).
# How Spark's Kafka reader says an offset it was asked for is gone (3.5: "Cannot fetch offset ...", 4.1: "Could
# not read records in offset [5, 8) for topic partition t-0").
UNREAD_OFFSET = re.compile(
    r"Cannot fetch (?:record for )?offset (?P<offset>\d+)(?:[^)]*?TopicPartition: (?P<topic>\S+)-(?P<partition>\d+)\))?"
    r"|Could not read records in offset \[(?P<first>\d+), \d+\) for topic partition (?P<tp>\S+)-(?P<tpn>\d+)"
)


def read_messages(
    spark: SparkSession, kafka: KafkaSettings, source: KafkaSource, ranges: list[Range], group: str
) -> DataFrame:
    """The messages of `ranges` (each partition at most once), as rows of topic, partition, offset, timestamp
    (NULL when the producer set none), key and value."""
    starts: dict[str, dict[str, int]] = {}
    ends: dict[str, dict[str, int]] = {}
    for r in ranges:
        if str(r.partition) in starts.get(r.topic, {}):
            raise ValueError(f"{r.describe()}: a partition may appear once in a batch")
        starts.setdefault(r.topic, {})[str(r.partition)] = r.start
        ends.setdefault(r.topic, {})[str(r.partition)] = r.end
    options = {
        **kafka.reader_options(source.options),
        "assign": json.dumps({topic: sorted(int(p) for p in parts) for topic, parts in starts.items()}),
        "startingOffsets": json.dumps(starts),
        "endingOffsets": json.dumps(ends),
        # An offset retention deleted after planning stops the batch: nothing is skipped without a trace.
        "failOnDataLoss": "true",
        "groupIdPrefix": group,
        "kafkaConsumer.pollTimeoutMs": str(kafka.timeout_seconds * 1000),
    }
    messages = spark.read.format("kafka").options(**options).load()
    return messages.select(
        "topic",
        "partition",
        "offset",
        F.when(F.col("timestampType") >= 0, F.col("timestamp")).alias("timestamp"),
        "key",
        "value",
    )


def parse_messages(messages: DataFrame, source: KafkaSource, topics: list[str]) -> DataFrame:
    """Landed rows from messages: the declared fields, `_corrupt_record`, `_rescued_data`, `_file_rejected` (never
    set), `_source_file` (`kafka://<topic>/<partition>/<offset>`, the offset zero-padded so it sorts),
    `_ingested_at`, then `KAFKA_LINEAGE`."""
    metadata = F.struct(
        F.concat(F.lit("kafka/"), "topic").alias("file_path"),
        F.col("topic").alias("_kafka_topic"),
        F.col("partition").alias("_kafka_partition"),
        F.col("offset").alias("_kafka_offset"),
        F.col("timestamp").alias("_kafka_timestamp"),
        F.col("key").alias("_kafka_key"),
    )
    text = messages.select(
        F.coalesce(F.col("value").cast("string"), F.lit("")).alias("value"), metadata.alias("_metadata")
    )
    as_file = FileSource(source.dataset, "json" if source.format == "raw" else source.format, source.schema)
    if source.format == "json":
        parsed = parse_json_lines(text, as_file, keep_blank=True)
    elif source.format == "csv":
        names = tuple(source.schema.names)
        # One layout, the schema's order, for every topic (layouts are keyed by "file name": here the topic).
        headers = CsvHeaders((names,), (None,), dict.fromkeys(topics, 0))  # type: ignore[arg-type]
        parsed = parse_csv_lines(text, as_file, headers, keep_blank=True).drop("_layout")
    else:
        utf8 = utf8_text(F.col("value")) == F.col("value")
        parsed = text.select(
            F.col("value"),
            F.when(~utf8, F.col("value")).alias(CORRUPT_COLUMN),
            F.lit(None).cast("string").alias(RESCUED_COLUMN),
            "_metadata",
        )
    if source.schema_evolution == "fail" and source.format != "raw":
        unknown = unknown_fields(source.schema)
        where = F.format_string(
            f"{UNKNOWN_FIELDS}: topic %s partition %d offset %d has field(s) %s",
            "_metadata._kafka_topic",
            "_metadata._kafka_partition",
            "_metadata._kafka_offset",
            F.array_join(unknown, ", "),
        )
        parsed = parsed.withColumn(
            RESCUED_COLUMN, F.when(F.size(unknown) > 0, F.raise_error(where)).otherwise(F.col(RESCUED_COLUMN))
        )
    offset = F.col("_metadata._kafka_offset")
    address = F.format_string(
        "kafka://%s/%d/%020d", "_metadata._kafka_topic", "_metadata._kafka_partition", "_metadata._kafka_offset"
    )
    return parsed.select(
        *source.schema.names,
        CORRUPT_COLUMN,
        RESCUED_COLUMN,
        F.lit(None).cast("string").alias(REJECTED_COLUMN),
        address.alias("_source_file"),
        batch_time(parsed.sparkSession, datetime.now(UTC), offset.isNull()).alias("_ingested_at"),
        *[F.col(f"_metadata.{f.name}").alias(f.name) for f in KAFKA_LINEAGE],
    )
