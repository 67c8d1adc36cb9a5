"""Sending landed lines to a Kafka topic: how the Kafka demo and benchmark feed a topic with the file demo's events."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from infra.errors import PipelineError
from infra.kafka import KafkaSettings
from infra.paths import open_landed


def topic_exists(kafka: KafkaSettings, topic: str) -> bool:
    """Whether `topic` exists on the brokers."""
    try:
        metadata = AdminClient(kafka.admin_config()).list_topics(timeout=kafka.timeout_seconds)
    except KafkaException as exc:
        raise PipelineError(f"Kafka brokers {kafka.bootstrap} did not answer: {exc.args[0].str()}") from None
    return topic in metadata.topics


def produce_lines(kafka: KafkaSettings, topic: str, files: Iterable[Path], partitions: int = 3) -> int:
    """Create `topic` with `partitions` partitions and send every non-blank line of `files`, in order, one message
    each (spread over the partitions by the producer); returns the messages sent."""
    admin = AdminClient(kafka.admin_config())
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result()
    producer = Producer({**kafka.admin_config(), "linger.ms": 20, "batch.num.messages": 10_000})
    sent = 0
    for path in files:
        with open_landed(path) as fh:
            for line in fh:
                value = line.rstrip(b"\r\n")
                if not value.strip():
                    continue
                while True:
                    try:
                        producer.produce(topic, value=value, partition=sent % partitions)
                        break
                    except BufferError:  # the local queue is full: let it drain
                        producer.poll(0.5)
                sent += 1
    if producer.flush(kafka.timeout_seconds * 4):
        raise PipelineError(f"Kafka brokers {kafka.bootstrap} did not take every message sent to topic {topic}")
    return sent
