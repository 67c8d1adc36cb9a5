"""The demo pipeline fed from Kafka equals the same pipeline fed from files; the lag sensor launches it when behind."""

from __future__ import annotations

from dataclasses import replace

from dagster import RunRequest, SkipReason, build_sensor_context

from infra.kafka import KafkaSettings
from infra.kafka_broker import start_broker
from orchestration.assets import asset_key
from orchestration.kafka_sensor import build_kafka_lag_sensor
from orchestration.resources import SparkResource
from pipelines.datasets import registry_with_events_from
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io.formats import table_format
from pipelines.io.kafka_produce import produce_lines
from pipelines.run.pipeline import run_pipeline
from pipelines.run.summary import table_numbers
from pipelines.spec.sources import KafkaSource
from quality.reconcile import pipelines_of, reconcile_pipeline
from tests.support.kafka_registry import produce_orders

TABLES = ["bronze.events", "silver.events", "gold.daily_revenue", "gold.event_counts_5m"]
LINEAGE = {"_source_file", "_ingested_at", "_batch_id"}


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
        run_pipeline(spark, files_home, registry_with_events_from("files"), TABLES)
        registry = registry_with_events_from("kafka")
        assert isinstance(registry.get("bronze.events").source, KafkaSource)
        reports = run_pipeline(spark, kafka_home, registry, TABLES)
    finally:
        broker.stop()
    assert reports[0].rows_in == landed.lines  # one bronze row per message, as one per landed line
    numbers = table_numbers(reports[0], "bronze.events")  # what Dagster records and plots
    assert (numbers["kafka_offsets_read"], numbers["kafka_lag"], numbers["kafka_partitions"]) == (landed.lines, 0, 3)
    assert [numbers[f"kafka_lag_events_{p}"] for p in range(3)] == [0, 0, 0]  # per partition too
    for table in ["silver.events", "silver.events_quarantine", *TABLES[2:]]:
        assert _rows(spark, kafka_home, table) == _rows(spark, files_home, table), table
    assert len(_rows(spark, kafka_home, "silver.events")) == landed.events

    pipeline = next(p for p in pipelines_of(registry) if p.bronze.name == "bronze.events")
    result = reconcile_pipeline(spark, kafka_home, pipeline)  # every message in exactly one place
    assert all(o.success for o in result.outcomes), [o.summary() for o in result.outcomes]
    assert result.outcomes[0].observed == f"{landed.lines} rows from 3 partitions, 3 with committed offsets"
    fmt = table_format(kafka_home)
    fmt.append(fmt.read(spark, "bronze.events").limit(1), "bronze.events", "a-second-writer", 0)
    doubled = reconcile_pipeline(spark, kafka_home, pipeline).outcomes[0]
    assert not doubled.success and "1 offsets are in the table more than once" in doubled.samples[0]


def test_the_lag_sensor_launches_the_kafka_fed_chain_once_behind(spark, fresh_settings, tmp_path, monkeypatch):
    broker = start_broker(tmp_path / "broker")
    try:
        monkeypatch.setenv("TRIBUTARY_KAFKA_BOOTSTRAP", broker.bootstrap)
        monkeypatch.setenv("TRIBUTARY_KAFKA_LAG_THRESHOLD", "5")
        resource = SparkResource(home=str(fresh_settings.home), catalog_name=fresh_settings.catalog_name)
        settings = resource.settings()
        produce_lines(settings.kafka, "events", [])  # creates the topic, empty
        registry = registry_with_events_from("kafka")
        assert build_kafka_lag_sensor(registry_with_events_from("files"), None, settings) is None
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
