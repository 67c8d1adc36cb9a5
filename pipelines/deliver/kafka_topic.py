"""A Kafka topic as a sink's destination: the rows and the sink's position in one Kafka transaction.

Each row is one message: its value the row as a JSON object, its key (with keys) the key columns as a JSON
object, and a deleted key a tombstone (a message without a value). The same transaction writes the new position
to the sink's ledger topic (`_tributary_sink_<name>`, one partition), so consumers that read committed messages
(`isolation.level=read_committed`, librdkafka's default) see a delivery whole or not at all. The producer's
transactional id is the sink's: a run that starts aborts whatever a killed run left open, and the position it
reads from the ledger says which changes were delivered.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from infra.errors import ConfigError
from pipelines.spec.delivery import Delivery, Destination, Position, SinkError

if TYPE_CHECKING:
    from infra.kafka import KafkaSettings
    from infra.settings import Settings

_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
# How far back from its end the ledger is read first for the last committed position (transaction markers and
# aborted records take offsets too); doubled until a position is found or the ledger's start is reached.
_TAIL = 16


def ledger_topic(sink: str) -> str:
    """The topic holding `sink`'s positions."""
    return f"_tributary_sink_{sink}"


@dataclass(frozen=True)
class KafkaTopic(Destination):
    """`topic` on the home's Kafka brokers (`TRIBUTARY_KAFKA_BOOTSTRAP` and client settings, never printed)."""

    topic: str
    keys: tuple[str, ...] = ()
    # Partitions of the topic when the sink creates it (an existing topic keeps its own).
    partitions: int = 3
    kind = "kafka"

    def __post_init__(self) -> None:
        if not _TOPIC.match(self.topic) or self.topic in (".", ".."):
            raise ConfigError(f"sink topic {self.topic!r} is not a Kafka topic name (letters, digits, '.', '_', '-')")
        if self.partitions < 1:
            raise ConfigError(f"sink topic {self.topic!r}: partitions must be at least 1, got {self.partitions}")

    def describe(self) -> str:
        return f"Kafka topic {self.topic}"

    def with_keys(self, keys: tuple[str, ...]) -> KafkaTopic:
        return self if self.keys else KafkaTopic(self.topic, keys, self.partitions)

    def _unreachable(self, sink: str, kafka: KafkaSettings, problem: str) -> SinkError:
        return SinkError(
            f"sink {sink}: Kafka brokers {kafka.bootstrap} did not answer ({problem}); nothing was delivered to "
            f"{self.describe()}: start the brokers or fix TRIBUTARY_KAFKA_BOOTSTRAP, and the next run delivers what "
            "was missed"
        )

    def _ensure_topics(self, sink: str, kafka: KafkaSettings) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient(kafka.admin_config())
        try:
            existing = admin.list_topics(timeout=kafka.timeout_seconds).topics
        except KafkaException as exc:
            raise self._unreachable(sink, kafka, exc.args[0].str()) from None
        wanted = {self.topic: self.partitions, ledger_topic(sink): 1}
        missing = [NewTopic(t, n, 1) for t, n in wanted.items() if t not in existing]
        for topic, future in admin.create_topics(missing).items() if missing else ():
            try:
                future.result()
            except KafkaException as exc:
                if "already exists" not in exc.args[0].str().lower():
                    raise SinkError(f"sink {sink}: creating Kafka topic {topic} failed: {exc.args[0].str()}") from None

    def position(self, settings: Settings, sink: str) -> Position | None:
        self._ensure_topics(sink, settings.kafka)
        self._producer(sink, settings.kafka)  # aborts what a killed run left open, so the ledger reads to its end
        record = self._last_record(sink, settings.kafka)
        return None if record is None else Position(record["table_id"], int(record["snapshot"]))

    def _producer(self, sink: str, kafka: KafkaSettings):
        """The sink's transactional producer, its transactions initialised: a transaction a killed run of the sink
        left open is aborted (and that run's producer fenced)."""
        from confluent_kafka import KafkaException, Producer

        config = {**kafka.admin_config(), "transactional.id": f"tributary-sink-{sink}", "linger.ms": 20}
        producer = Producer(config)
        try:
            producer.init_transactions(kafka.timeout_seconds)
        except KafkaException as exc:
            raise self._unreachable(sink, kafka, exc.args[0].str()) from None
        return producer

    def _last_record(self, sink: str, kafka: KafkaSettings) -> dict | None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        config = {**kafka.consumer_config(f"tributary-sink-{sink}"), "isolation.level": "read_committed"}
        consumer = Consumer(config)
        try:
            partition = TopicPartition(ledger_topic(sink), 0)
            low, high = consumer.get_watermark_offsets(partition, timeout=kafka.timeout_seconds, cached=False)
            back = _TAIL
            while True:
                start = max(low, high - back)
                found = self._read(sink, consumer, start, high, kafka.timeout_seconds)
                if found is not None or start == low:
                    return found
                back *= 2
        except KafkaException as exc:
            raise self._unreachable(sink, kafka, exc.args[0].str()) from None
        finally:
            consumer.close()

    @staticmethod
    def _read(sink: str, consumer, start: int, high: int, timeout: float) -> dict | None:
        """The last committed record at offsets [start, high) of the ledger (read_committed skips aborted ones)."""
        import time

        from confluent_kafka import TopicPartition

        if start >= high:
            return None
        topic = ledger_topic(sink)
        consumer.assign([TopicPartition(topic, 0, start)])
        last = None
        deadline = time.monotonic() + timeout
        while True:
            for message in consumer.consume(500, 0.2):
                if message.error() is None and message.value() is not None:
                    last = json.loads(message.value())
            if consumer.position([TopicPartition(topic, 0)])[0].offset >= high:
                return last
            if time.monotonic() > deadline:
                raise SinkError(f"sink {sink}: its ledger topic {topic} could not be read to its end in {timeout} s")

    def held_rows(self, settings: Settings, sink: str) -> int | None:
        """The messages the sink delivered so far, when each row is one message (no keys: nothing compacts or
        deletes them); None with keys."""
        if self.keys:
            return None
        self._ensure_topics(sink, settings.kafka)
        record = self._last_record(sink, settings.kafka)
        return None if record is None else int(record.get("total", 0))

    def deliver(self, settings: Settings, delivery: Delivery) -> tuple[int, int]:
        from confluent_kafka import KafkaException
        from pyspark.sql import functions as F

        kafka = settings.kafka
        rows = delivery.rows
        key = F.to_json(F.struct(*self.keys)) if self.keys else F.lit(None).cast("string")
        # Read a partition at a time (toLocalIterator): the driver never holds the whole delivery.
        messages = rows.select(key.alias("k"), F.to_json(F.struct(*rows.columns)).alias("v"))
        gone = (
            delivery.deleted.select(F.to_json(F.struct(*self.keys)).alias("k"))
            if delivery.deleted is not None
            else None
        )
        sent = deleted = 0
        timeout = kafka.timeout_seconds
        producer = self._producer(delivery.sink, kafka)
        try:
            record = self._last_record(delivery.sink, kafka)
            found = None if record is None else Position(record["table_id"], int(record["snapshot"]))
            if found != delivery.since:
                raise SinkError(
                    f"sink {delivery.sink}: {self.describe()} received other changes while this run read its own "
                    "(another run of the sink?); nothing was delivered: run it again"
                )
            producer.begin_transaction()
            try:
                for message in messages.toLocalIterator(prefetchPartitions=True):
                    _send(producer, self.topic, message["k"], message["v"])
                    sent += 1
                for message in gone.toLocalIterator() if gone is not None else ():
                    _send(producer, self.topic, message["k"], None)
                    deleted += 1
                delivered = {
                    "sink": delivery.sink,
                    "table": delivery.table,
                    "table_id": delivery.until.table_id,
                    "snapshot": delivery.until.snapshot,
                    "rows": sent,
                    "deleted": deleted,
                    # Messages delivered by the sink so far, every delivery included.
                    "total": (record or {}).get("total", 0) + sent,
                }
                _send(producer, ledger_topic(delivery.sink), delivery.sink, json.dumps(delivered))
                producer.commit_transaction(timeout)
            except BaseException:
                # Not left open for the transaction timeout, where it would hold back every committed reader.
                with contextlib.suppress(KafkaException):
                    producer.abort_transaction(timeout)
                raise
        except KafkaException as exc:
            raise SinkError(
                f"sink {delivery.sink}: delivering to {self.describe()} at {kafka.bootstrap} failed, nothing was "
                f"delivered: {exc.args[0].str()}"
            ) from None
        return sent, deleted


def _send(producer, topic: str, key: str | None, value: str | None) -> None:
    while True:
        try:
            producer.produce(topic, key=key, value=value)
            return
        except BufferError:  # the local queue is full: let it drain
            producer.poll(0.5)
