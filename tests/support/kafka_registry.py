"""Kafka test helpers: a registry whose bronze table reads a topic, and a producer of JSON messages."""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import pipelines.authoring as tb
from pipelines.authoring.declarations import DECLARED, Declaration
from pipelines.authoring.load import build_registry
from pipelines.spec.registry import Registry

ORDERS = tb.schema("order_id string, quantity int, amount decimal(10,2), ordered_at timestamp")


def kafka_declaration(table: str = "bronze.orders", *topics: str, **options: Any) -> Declaration:
    """A landing declaration of `table` reading `topics` (default: `orders`), taken out of the global list."""
    tb.landing(table, tb.kafka(*(topics or ("orders",)), schema=options.pop("schema", ORDERS), **options))
    declared = next(d for d in reversed(DECLARED) if d.module == __name__)
    DECLARED.remove(declared)
    return declared


def kafka_registry(*topics: str, **options: Any) -> Registry:
    """A registry of one Kafka-fed bronze table, `bronze.orders`."""
    return build_registry([kafka_declaration("bronze.orders", *topics, **options)])


def create_topic(bootstrap: str, topic: str, partitions: int = 3) -> None:
    """Create `topic` with `partitions` partitions."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result()


def order(i: int) -> dict[str, Any]:
    """Order number `i` as its producer sends it."""
    return {
        "order_id": f"o{i:06d}",
        "quantity": i % 7 + 1,
        "amount": f"{i % 1000}.{i % 100:02d}",
        "ordered_at": f"2026-11-{i % 28 + 1:02d}T{i % 24:02d}:00:00Z",
    }


def produce(bootstrap: str, topic: str, values: list[bytes | str | None], partitions: int = 3, start: int = 0) -> None:
    """Send `values` round-robin over `partitions` (message i to partition (start + i) % partitions), keyed by i."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, value in enumerate(values):
        payload = value.encode() if isinstance(value, str) else value
        producer.produce(topic, key=str(start + i).encode(), value=payload, partition=(start + i) % partitions)
    producer.flush(30)


def produce_orders(bootstrap: str, topic: str, first: int, count: int, partitions: int = 3) -> None:
    """Send orders first..first+count-1 as JSON."""
    produce(bootstrap, topic, [json.dumps(order(i)) for i in range(first, first + count)], partitions, first)
