"""Reading planned Kafka offset ranges on the executors, and parsing messages into landed rows.

Each range is read by one task with its own confluent-kafka consumer assigned to the range's start (no group
membership, no commits), until the consumer's position reaches the range's end. Values are parsed like landed
lines (`pipelines.io.landing_parse`): a value that is not a JSON object (or a CSV line of the wrong shape, or not
UTF-8) is kept whole in `_corrupt_record`, an empty value (a tombstone) too, and unknown fields go to
`_rescued_data`. A CSV value is matched to the schema's columns in order: a message has no header.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType, TimestampType

from infra.kafka import KafkaSettings
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
)
from pipelines.spec.tables import FileSource, KafkaSource

# Failures raised on an executor start with these words, so the runner can turn them into one line.
READ_FAILED = "TributaryKafkaRead"
UNKNOWN_FIELDS = "TributaryKafkaUnknownFields"
MESSAGES = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
    ]
)
_RANGES = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("start", LongType()),
        StructField("end", LongType()),
    ]
)
_ARROW = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("key", pa.binary()),
        ("value", pa.binary()),
    ]
)
_ROWS_PER_ARROW_BATCH = 20_000


def read_messages(
    spark: SparkSession, kafka: KafkaSettings, source: KafkaSource, ranges: list[Range], group: str
) -> DataFrame:
    """The messages of `ranges` (one task per range), as `MESSAGES` rows."""
    # The logger stays on the driver (not picklable); each task's consumer gets its own.
    config = {k: v for k, v in kafka.consumer_config(group, source.options).items() if k != "logger"}
    timeout = kafka.timeout_seconds
    rows = [(r.topic, r.partition, r.start, r.end) for r in ranges]
    planned = spark.createDataFrame(spark.sparkContext.parallelize(rows, max(1, len(rows))), _RANGES)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for topic, partition, start, end in zip(*(c.to_pylist() for c in batch.columns), strict=True):
                yield from _read_range(config, timeout, Range(topic, partition, start, end))

    return planned.mapInArrow(read, MESSAGES)


def _read_range(config: dict[str, Any], timeout: int, planned: Range) -> Iterator[pa.RecordBatch]:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    client = Consumer({**config, "logger": logging.getLogger("tributary.kafka.client")})
    columns: list[list] = [[] for _ in _ARROW.names]
    try:
        client.assign([TopicPartition(planned.topic, planned.partition, planned.start)])
        position, idle = planned.start, time.monotonic()
        while position < planned.end:
            messages = client.consume(min(10_000, planned.end - position), timeout=1.0)
            if not messages:
                # Offsets without a message (transaction markers, compacted records) move the position only.
                position = max(position, client.position([TopicPartition(planned.topic, planned.partition)])[0].offset)
                if time.monotonic() - idle > timeout and position < planned.end:
                    raise RuntimeError(
                        f"{READ_FAILED}: {planned.describe()}: no message for {timeout} s at offset {position} "
                        f"from {config['bootstrap.servers']}"
                    )
                continue
            idle = time.monotonic()
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise RuntimeError(f"{READ_FAILED}: {planned.describe()}: {error.str()}")
                offset = message.offset()
                if offset >= planned.end:
                    position = planned.end
                    break
                kind, stamp = message.timestamp()
                for column, value in zip(
                    columns,
                    (
                        planned.topic,
                        planned.partition,
                        offset,
                        stamp * 1000 if kind else None,
                        message.key(),
                        message.value(),
                    ),
                    strict=True,
                ):
                    column.append(value)
                position = offset + 1
            if len(columns[0]) >= _ROWS_PER_ARROW_BATCH:
                yield _arrow(columns)
                columns = [[] for _ in _ARROW.names]
    finally:
        client.close()
    if columns[0]:
        yield _arrow(columns)


def _arrow(columns: list[list]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array(c, t) for c, t in zip(columns, _ARROW.types, strict=True)], _ARROW.names
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
        utf8 = F.decode(F.encode("value", "UTF-8"), "UTF-8") == F.col("value")
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
    address = F.format_string(
        "kafka://%s/%d/%020d", "_metadata._kafka_topic", "_metadata._kafka_partition", "_metadata._kafka_offset"
    )
    return parsed.select(
        *source.schema.names,
        CORRUPT_COLUMN,
        RESCUED_COLUMN,
        F.lit(None).cast("string").alias(REJECTED_COLUMN),
        address.alias("_source_file"),
        F.current_timestamp().alias("_ingested_at"),
        *[F.col(f"_metadata.{f.name}").alias(f.name) for f in KAFKA_LINEAGE],
    )
