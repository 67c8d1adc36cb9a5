"""The demo pipeline fed from Kafka equals the same pipeline fed from files; the lag sensor launches it when behind."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from dagster import RunRequest, SkipReason, build_sensor_context

from infra.kafka import KafkaSettings
from infra.kafka_broker import start_broker
from orchestration.assets import asset_key
from orchestration.kafka_sensor import build_kafka_lag_sensor
from orchestration.resources import SparkResource
from pipelines.authoring.discover import load_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io.formats import table_format
from pipelines.io.kafka_produce import produce_lines
from pipelines.run.pipeline import run_pipeline
from pipelines.spec.registry import Registry
from pipelines.spec.tables import KafkaSource
from tests.support.kafka_registry import produce_orders

TABLES = ["bronze.events", "silver.events", "gold.daily_revenue", "gold.event_counts_5m"]
LINEAGE = {"_source_file", "_ingested_at", "_batch_id"}


@contextmanager
def ecommerce(source: str) -> Iterator[Registry]:
    """The e-commerce dataset's registry with `TRIBUTARY_EVENTS_SOURCE=source` (restored afterwards)."""
    import pipelines.datasets.ecommerce.tables as tables

    before = os.environ.get("TRIBUTARY_EVENTS_SOURCE")
    os.environ["TRIBUTARY_EVENTS_SOURCE"] = source
    try:
        importlib.reload(tables)
        yield load_registry(["pipelines.datasets.ecommerce"])
    finally:
        if before is None:
            os.environ.pop("TRIBUTARY_EVENTS_SOURCE")
        else:
            os.environ["TRIBUTARY_EVENTS_SOURCE"] = before
        importlib.reload(tables)


def _rows(spark, settings, table: str) -> list[tuple]:
    df = table_format(settings).read(spark, table)
    rows = df.select(*[c for c in df.columns if c not in LINEAGE]).collect()
    return sorted((tuple(r) for r in rows), key=repr)


def test_silver_and_gold_from_a_kafka_fed_bronze_equal_the_file_fed_ones(spark, settings_factory, tmp_path):
    files_home, kafka_home = settings_factory(), settings_factory()
    landed = generate(files_home.landing, rows=4000, files=4, seed=11, progress=False)
    broker = start_broker(tmp_path / "broker")
    try:
        kafka_home = replace(kafka_home, kafka=KafkaSettings(bootstrap=broker.bootstrap, timeout_seconds=10))
        assert produce_lines(kafka_home.kafka, "events", landed.files) == landed.lines
        with ecommerce("files") as registry:
            run_pipeline(spark, files_home, registry, TABLES)
        with ecommerce("kafka") as registry:
            assert isinstance(registry.get("bronze.events").source, KafkaSource)
            reports = run_pipeline(spark, kafka_home, registry, TABLES)
    finally:
        broker.stop()
    assert reports[0].rows_in == landed.lines  # one bronze row per message, as one per landed line
    for table in ["silver.events", "silver.events_quarantine", *TABLES[2:]]:
        assert _rows(spark, kafka_home, table) == _rows(spark, files_home, table), table
    assert len(_rows(spark, kafka_home, "silver.events")) == landed.events


def test_the_lag_sensor_launches_the_kafka_fed_chain_once_behind(spark, fresh_settings, tmp_path, monkeypatch):
    broker = start_broker(tmp_path / "broker")
    try:
        monkeypatch.setenv("TRIBUTARY_KAFKA_BOOTSTRAP", broker.bootstrap)
        monkeypatch.setenv("TRIBUTARY_KAFKA_LAG_THRESHOLD", "5")
        resource = SparkResource(home=str(fresh_settings.home), catalog_name=fresh_settings.catalog_name)
        settings = resource.settings()
        produce_lines(settings.kafka, "events", [])  # creates the topic, empty
        with ecommerce("kafka") as registry:
            sensor = build_kafka_lag_sensor(registry, None, settings)
            assert sensor is not None
            assert isinstance(sensor(build_sensor_context(resources={"spark": resource})), SkipReason)
            produce_orders(broker.bootstrap, "events", 0, 4)  # below the threshold
            assert isinstance(sensor(build_sensor_context(resources={"spark": resource})), SkipReason)
            produce_orders(broker.bootstrap, "events", 4, 4)
            request = sensor(build_sensor_context(resources={"spark": resource}))
            assert isinstance(request, RunRequest) and request.tags["tributary/kafka_lag"] == "8"
            selected = set(request.asset_selection or [])
            assert {asset_key("bronze.events"), asset_key("silver.events"), asset_key("gold.daily_revenue")} <= selected
            assert asset_key("bronze.impressions") not in selected
            run_pipeline(spark, settings, registry, ["bronze.events"])
            assert isinstance(sensor(build_sensor_context(resources={"spark": resource})), SkipReason)
    finally:
        broker.stop()
