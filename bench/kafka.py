"""Kafka into bronze beside files into bronze: the same events, one home each, messages (rows) per second.

The events are the demo's, generated once; the Kafka home's topic gets every landed line as one message (3
partitions) from the test broker on 127.0.0.1 (`infra.kafka_broker`), and each home runs `bronze.events` once.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from infra.kafka import KafkaSettings
from infra.kafka_broker import start_broker
from infra.settings import Settings
from infra.spark import get_spark
from pipelines.datasets import registry_with_events_from
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io.kafka_produce import produce_lines
from pipelines.run.runner import run_table


def _home(settings: Settings, name: str) -> Settings:
    home = settings.home.parent / f"{settings.home.name}-{name}"
    return replace(settings.with_home(home), catalog_name=f"{settings.catalog_name}{name}")


def bench_kafka(settings: Settings, messages: int = 500_000, files: int = 10) -> dict[str, Any]:
    """Seconds and rows per second of bronze.events from a Kafka topic and from landed files, same events."""
    files_home, kafka_home = _home(settings, "files"), _home(settings, "kafka")
    landed = generate(files_home.landing, rows=messages, files=files, seed=5)
    broker = start_broker(settings.home / "broker")
    try:
        kafka_home = replace(kafka_home, kafka=KafkaSettings(bootstrap=broker.bootstrap, timeout_seconds=60))
        started = time.perf_counter()
        produced = produce_lines(kafka_home.kafka, "events", landed.files)
        produce_seconds = time.perf_counter() - started
        spark = get_spark(files_home)
        from_files = run_table(spark, files_home, registry_with_events_from("files").get("bronze.events"))
        get_spark(kafka_home)
        from_kafka = run_table(spark, kafka_home, registry_with_events_from("kafka").get("bronze.events"))
        again = run_table(spark, kafka_home, registry_with_events_from("kafka").get("bronze.events"))
    finally:
        broker.stop()
    result = {
        "messages": produced,
        "produce_seconds": round(produce_seconds, 2),
        "kafka": {
            "seconds": from_kafka.seconds,
            "rows": from_kafka.rows_in,
            "batches": from_kafka.batches,
            "rows_per_second": round(from_kafka.rows_in / from_kafka.seconds, 1),
            "noop_rerun_seconds": again.seconds,
        },
        "files": {
            "seconds": from_files.seconds,
            "rows": from_files.rows_in,
            "rows_per_second": round(from_files.rows_in / from_files.seconds, 1),
        },
    }
    result["kafka_vs_files_seconds"] = round(from_kafka.seconds / from_files.seconds, 2)
    return result
