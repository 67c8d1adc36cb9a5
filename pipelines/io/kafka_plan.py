"""What a Kafka run reads: the offsets committed with the table, the brokers' end offsets, and the ranges between.

Offsets are kept with the table (the `tributary.kafka.offsets` property of each commit that wrote a batch), never
in a consumer group: a run reads from them up to the end offsets taken when it starts, and commits each batch's
rows with its new offsets in one table commit, so a killed run leaves the table and its offsets consistent.
The driver plans here; executors read the ranges (`pipelines.io.kafka_read`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaException, TopicPartition

from infra.errors import PipelineError
from infra.kafka import KafkaSettings
from pipelines.spec.sources import KafkaSource

OFFSETS_PROPERTY = "tributary.kafka.offsets"
LOST_PROPERTY = "tributary.kafka.lost"

Offsets = dict[tuple[str, int], int]  # (topic, partition) -> the next offset to read
Ends = dict[tuple[str, int], tuple[int, int]]  # (topic, partition) -> (low, high) watermark offsets


@dataclass(frozen=True)
class Range:
    """Offsets [start, end) of one partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        """How many offsets the range spans."""
        return self.end - self.start

    def describe(self) -> str:
        """`topic t partition p offsets a-b` (inclusive, as Kafka tools show them)."""
        return f"topic {self.topic} partition {self.partition} offsets {self.start}-{self.end - 1}"


@dataclass
class Plan:
    """One run's reading: the ranges, where every partition starts, and what retention took before it was read."""

    ranges: list[Range]
    starts: Offsets
    lost: list[Range] = field(default_factory=list)

    @property
    def offsets(self) -> int:
        """Offsets the run will read."""
        return sum(r.size for r in self.ranges)


def encode(offsets: Offsets) -> str:
    """Offsets as the JSON kept with a table commit: `{"topic": {"partition": next_offset}}`."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return json.dumps(out, sort_keys=True, separators=(",", ":"))


def decode(text: str) -> Offsets:
    """The offsets `encode` wrote."""
    return {(t, int(p)): int(o) for t, parts in json.loads(text).items() for p, o in parts.items()}


def encode_ranges(ranges: list[Range]) -> str:
    """Ranges as JSON (`[[topic, partition, start, end], ...]`, end exclusive)."""
    return json.dumps([[r.topic, r.partition, r.start, r.end] for r in ranges], separators=(",", ":"))


@contextmanager
def consumer(kafka: KafkaSettings, source: KafkaSource, group: str) -> Iterator[Consumer]:
    """A consumer for planning and lag with the source's own settings (closed afterwards)."""
    client = Consumer(kafka.consumer_config(group, source.options))
    try:
        yield client
    finally:
        client.close()


def unreachable(table: str, kafka: KafkaSettings, exc: BaseException) -> PipelineError:
    """The one line for brokers that do not answer."""
    reason = exc.args[0].str() if isinstance(exc, KafkaException) and exc.args else str(exc)
    return PipelineError(
        f"table {table}: Kafka brokers {kafka.bootstrap} did not answer within {kafka.timeout_seconds} s ({reason}); "
        "check TRIBUTARY_KAFKA_BOOTSTRAP and that the brokers are up (nothing was written)"
    )


def end_offsets(client: Consumer, kafka: KafkaSettings, source: KafkaSource, table: str) -> Ends:
    """(low, high) watermark offsets of every partition of the source's topics, asked of the brokers now."""
    try:
        metadata = client.list_topics(timeout=kafka.timeout_seconds)
        topics = _topics(metadata, source, table, kafka)
        out = {}
        for topic in topics:
            for partition in sorted(metadata.topics[topic].partitions):
                tp = TopicPartition(topic, partition)
                out[(topic, partition)] = client.get_watermark_offsets(tp, timeout=kafka.timeout_seconds, cached=False)
        return out
    except KafkaException as exc:
        raise unreachable(table, kafka, exc) from None


def _topics(metadata, source: KafkaSource, table: str, kafka: KafkaSettings) -> list[str]:
    known = {name for name, t in metadata.topics.items() if t.error is None and not name.startswith("__")}
    if source.pattern is not None:
        return sorted(t for t in known if re.fullmatch(source.pattern, t))
    missing = [t for t in source.topics if t not in known]
    if missing:
        raise PipelineError(
            f"table {table}: Kafka topic {missing[0]!r} does not exist on {kafka.bootstrap}; create it, or fix "
            "the topic name in the table's kafka(...) source (nothing was written)"
        )
    return list(source.topics)


def plan_run(ends: Ends, committed: Offsets, source: KafkaSource, table: str) -> Plan:
    """The ranges from the committed offsets to the end offsets; a partition never read starts at its earliest
    offset (partitions added to a topic are picked up). Offsets lost to retention, a partition that is gone and a
    partition behind its committed offset (a topic deleted and created again) stop the run unless the source
    allows data loss, which then skips (and records) what was lost."""
    ranges, lost, starts = [], [], {}
    for key, (low, high) in sorted(ends.items()):
        topic, partition = key
        start = committed.get(key, low)
        if start < low:
            gone = Range(topic, partition, start, low)
            if source.fail_on_data_loss:
                raise PipelineError(
                    f"table {table}: {gone.describe()} were deleted by the topic's retention before they were read; "
                    "set fail_on_data_loss=False in the table's kafka(...) source to skip them (they are recorded "
                    "with the table's commit), or restore them (nothing was written)"
                )
            lost.append(gone)
            start = low
        elif start > high:
            if source.fail_on_data_loss:
                raise PipelineError(
                    f"table {table}: topic {topic} partition {partition} ends at offset {high} but the table has read "
                    f"up to {start}: the topic was deleted and created again (or truncated); set "
                    "fail_on_data_loss=False in its kafka(...) source to read it from its earliest offset"
                )
            start = low
        starts[key] = start
        if high > start:
            ranges.append(Range(topic, partition, start, high))
    present = {topic for topic, _ in ends}
    gone = sorted(k for k in committed if k not in ends and k[0] in present)
    if gone and source.fail_on_data_loss:
        topic, partition = gone[0]
        raise PipelineError(
            f"table {table}: topic {topic} partition {partition}, which the table has read, no longer exists (the "
            "topic was deleted or recreated with fewer partitions); set fail_on_data_loss=False in its kafka(...) "
            "source to go on without it"
        )
    return Plan(ranges, starts, lost)


def batches(ranges: list[Range], limit: int) -> list[list[Range]]:
    """The ranges cut into batches of at most `limit` offsets, each partition's share taken in offset order."""
    remaining = [r for r in ranges if r.size > 0]
    out = []
    while remaining:
        share, budget = max(1, limit // len(remaining)), limit
        batch, rest = [], []
        for r in remaining:
            take = min(r.size, share, budget)
            if take:
                batch.append(Range(r.topic, r.partition, r.start, r.start + take))
                budget -= take
            if take < r.size:
                rest.append(Range(r.topic, r.partition, r.start + take, r.end))
        out.append(batch)
        remaining = rest
    return out


def lag(ends: Ends, committed: Offsets) -> dict[tuple[str, int], int]:
    """Messages behind per partition: end offset minus committed offset (a partition never read: all of it)."""
    return {key: max(0, high - committed.get(key, low)) for key, (low, high) in ends.items()}
