"""Kafka topics into bronze, exactly once, against a real Kafka-protocol broker on 127.0.0.1 (infra.kafka_broker)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from dataclasses import replace

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from pyspark.sql import SparkSession

from infra.errors import PipelineError
from infra.kafka import KafkaSettings
from infra.kafka_broker import Broker, free_port
from infra.settings import Settings
from pipelines.authoring.load import build_registry
from pipelines.io.formats import table_format
from pipelines.io.kafka_plan import LOST_PROPERTY, OFFSETS_PROPERTY, decode
from pipelines.run.runner import run_table
from pipelines.sources.kafka import group_id
from tests.support.jvm import short_lived
from tests.support.kafka_registry import (
    create_topic,
    kafka_declaration,
    kafka_registry,
    order,
    produce,
    produce_orders,
)
from tests.support.killed_child import run_killed_child
from tests.support.repo import REPO

_topics = itertools.count()


def _topic(broker: Broker, partitions: int = 3) -> str:
    name = f"orders{next(_topics)}"
    create_topic(broker.bootstrap, name, partitions)
    return name


def _with(settings: Settings, broker: Broker) -> Settings:
    return replace(settings, kafka=KafkaSettings(bootstrap=broker.bootstrap, timeout_seconds=5))


def _landed(spark: SparkSession, settings: Settings) -> list[tuple[str, int, int]]:
    df = table_format(settings).read(spark, "bronze.orders")
    rows = df.select("_kafka_topic", "_kafka_partition", "_kafka_offset").collect()
    return sorted(tuple(r) for r in rows)


def _every_offset(topic: str, counts: dict[int, int]) -> list[tuple[str, int, int]]:
    return sorted((topic, p, o) for p, n in counts.items() for o in range(n))


def test_messages_on_three_partitions_land_once_and_a_rerun_adds_nothing(spark, format_settings, broker):
    settings = _with(format_settings, broker)
    topic = _topic(broker)
    produce_orders(broker.bootstrap, topic, 0, 1000)
    garbage = ["not json", "", None, b"\xff\xfe", '{"order_id": "x", "coupon": "y"}']
    produce(broker.bootstrap, topic, garbage, start=1000)
    spec = kafka_registry(topic, max_offsets_per_batch=400).get("bronze.orders")
    fmt = table_format(settings)

    report = run_table(spark, settings, spec)
    assert report.rows_in == 1005 and report.batches == 3  # 1005 offsets in batches of at most 400
    assert report.metrics["kafka_offsets_read"] == 1005 and report.metrics["kafka_lag"] == 0
    assert _landed(spark, settings) == _every_offset(topic, {0: 335, 1: 335, 2: 335})
    bronze = fmt.read(spark, "bronze.orders")
    corrupt = sorted(r[0] for r in bronze.filter("_corrupt_record IS NOT NULL").select("_corrupt_record").collect())
    assert corrupt == ["", "", "not json", "\ufffd\ufffd"]  # an empty value and a tombstone are kept, not dropped
    rescued = bronze.filter("order_id = 'x'").collect()[0]
    assert json.loads(rescued["_rescued_data"]) == {"coupon": "y"}
    first = bronze.filter("order_id = 'o000004'").collect()[0]
    assert (first.quantity, str(first.amount), first._kafka_key) == (5, "4.04", bytearray(b"4"))
    assert first._source_file == f"kafka://{topic}/1/{1:020d}"
    offsets = decode(fmt.latest_properties(spark, "bronze.orders", OFFSETS_PROPERTY)[OFFSETS_PROPERTY])
    assert offsets == {(topic, 0): 335, (topic, 1): 335, (topic, 2): 335}
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group_id("bronze.orders")})
    try:  # the group mirrors the table's offsets, for lag tools
        committed = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
        assert [tp.offset for tp in committed] == [335, 335, 335]
    finally:
        consumer.close()

    snapshot = fmt.current_snapshot(spark, "bronze.orders")
    again = run_table(spark, settings, spec)
    assert again.skipped and again.rows_in == 0
    assert fmt.current_snapshot(spark, "bronze.orders") == snapshot

    produce_orders(broker.bootstrap, topic, 2000, 7)  # new messages add exactly themselves
    more = run_table(spark, settings, spec)
    assert more.rows_in == 7 and len(_landed(spark, settings)) == 1012
    assert len(set(_landed(spark, settings))) == 1012


@pytest.mark.parametrize("point,commit", [("before", 2), ("after", 2), ("after", 4)])
def test_a_run_killed_mid_read_or_after_a_commit_then_rerun_lands_each_offset_once(
    spark, fresh_settings, broker, point, commit
):
    settings = _with(fresh_settings, broker)
    topic = _topic(broker)
    produce_orders(broker.bootstrap, topic, 0, 1200)
    arguments = [str(settings.home), settings.catalog_name, broker.bootstrap, topic, "300", str(commit), point]
    run_killed_child(settings, "tests.support.kafka_child", *arguments)
    fmt = table_format(settings)
    kept = fmt.stats(spark, "bronze.orders").rows
    assert kept == 300 * (commit - 1 if point == "before" else commit)  # what committed before the kill, only
    spec = kafka_registry(topic, max_offsets_per_batch=300).get("bronze.orders")
    report = run_table(spark, settings, spec)
    assert report.rows_in == 1200 - kept
    assert _landed(spark, settings) == _every_offset(topic, {0: 400, 1: 400, 2: 400})


def test_two_runs_at_once_land_each_offset_once(spark, fresh_settings, broker):
    settings = _with(fresh_settings, broker)
    topic = _topic(broker)
    produce_orders(broker.bootstrap, topic, 0, 900)
    arguments = [str(settings.home), settings.catalog_name, broker.bootstrap, topic, "300", "0", "none"]
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.support.kafka_child", *arguments],
            cwd=REPO,
            env={**short_lived(dict(os.environ)), "TRIBUTARY_HOME": str(settings.home)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for child in children:
        _, err = child.communicate(timeout=600)
        assert child.returncode == 0, err[-3000:]
    assert _landed(spark, settings) == _every_offset(topic, {0: 300, 1: 300, 2: 300})


def test_an_unknown_topic_and_unreachable_brokers_stop_with_one_line(spark, fresh_settings, broker):
    settings = _with(fresh_settings, broker)
    spec = kafka_registry("no_such_topic").get("bronze.orders")
    with pytest.raises(PipelineError, match=r"Kafka topic 'no_such_topic' does not exist on 127\.0\.0\.1:\d+; create"):
        run_table(spark, settings, spec)
    down = replace(settings, kafka=KafkaSettings(bootstrap=f"127.0.0.1:{free_port()}", timeout_seconds=2))
    started = time.monotonic()
    with pytest.raises(PipelineError, match=r"Kafka brokers 127\.0\.0\.1:\d+ did not answer within 2 s .*"):
        run_table(spark, down, spec)
    assert time.monotonic() - started < 30
    assert not table_format(settings).exists(spark, "bronze.orders")


def test_offsets_deleted_by_retention_are_detected_then_skipped_and_recorded_when_allowed(
    spark, fresh_settings, broker
):
    settings = _with(fresh_settings, broker)
    topic = _topic(broker)
    produce_orders(broker.bootstrap, topic, 0, 30)
    spec = kafka_registry(topic).get("bronze.orders")
    run_table(spark, settings, spec)  # 10 offsets per partition read
    produce_orders(broker.bootstrap, topic, 30, 30)  # offsets 10-19 of each partition, then 10-14 of 1 deleted
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 1, 15)]).values():
        future.result()
    with pytest.raises(PipelineError, match=rf"topic {topic} partition 1 offsets 10-14 were deleted by the topic's"):
        run_table(spark, settings, spec)
    assert table_format(settings).stats(spark, "bronze.orders").rows == 30  # nothing written

    lenient = kafka_registry(topic, fail_on_data_loss=False).get("bronze.orders")
    report = run_table(spark, settings, lenient)
    assert report.rows_in == 25 and report.metrics["kafka_offsets_lost"] == 5
    lost = json.loads(table_format(settings).latest_properties(spark, "bronze.orders", LOST_PROPERTY)[LOST_PROPERTY])
    assert lost == [[topic, 1, 10, 15]]
    offsets = {(t, p, o) for t, p, o in _landed(spark, settings)}
    assert offsets == {(topic, p, o) for p in range(3) for o in range(20)} - {(topic, 1, o) for o in range(10, 15)}


def test_added_partitions_are_picked_up_and_a_recreated_topic_is_refused(spark, fresh_settings, broker):
    settings = _with(fresh_settings, broker)
    topic = _topic(broker, partitions=2)
    produce_orders(broker.bootstrap, topic, 0, 20, partitions=2)
    spec = kafka_registry(topic).get("bronze.orders")
    run_table(spark, settings, spec)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_partitions([NewPartitions(topic, 3)]).values():
        future.result()
    produce_orders(broker.bootstrap, topic, 20, 9)  # 3 to each of the 3 partitions
    report = run_table(spark, settings, spec)
    assert report.rows_in == 9 and report.metrics["kafka_partitions"] == 3
    assert _landed(spark, settings) == _every_offset(topic, {0: 13, 1: 13, 2: 3})

    for future in admin.delete_topics([topic]).values():
        future.result()
    deadline = time.monotonic() + 20
    while True:  # the broker forgets a deleted topic asynchronously
        try:
            create_topic(broker.bootstrap, topic, 3)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    produce_orders(broker.bootstrap, topic, 100, 3)
    with pytest.raises(PipelineError, match=rf"topic {topic} partition \d ends at offset 1 but the table has read up"):
        run_table(spark, settings, spec)


def test_unknown_fields_stop_a_strict_source_naming_the_message(spark, fresh_settings, broker):
    settings = _with(fresh_settings, broker)
    topic = _topic(broker, partitions=1)
    produce(broker.bootstrap, topic, ['{"order_id": "a"}', '{"order_id": "b", "coupon": "c"}'], partitions=1)
    spec = kafka_registry(topic, schema_evolution="fail").get("bronze.orders")
    with pytest.raises(PipelineError, match=rf"topic {topic} partition 0 offset 1 has field\(s\) coupon the schema"):
        run_table(spark, settings, spec)
    assert table_format(settings).stats(spark, "bronze.orders").rows == 0


def test_csv_values_land_by_column_order_and_raw_values_as_text(spark, fresh_settings, broker):
    settings = _with(fresh_settings, broker)
    topic = _topic(broker, partitions=1)
    produce(broker.bootstrap, topic, ["o1,3,9.50,2026-11-02T10:00:00Z", "o2,x,1.00,2026-11-02T11:00:00Z", "o3,1"], 1)
    spec = kafka_registry(topic, format="csv").get("bronze.orders")
    assert run_table(spark, settings, spec).rows_in == 3
    rows = {r.order_id: r for r in table_format(settings).read(spark, "bronze.orders").collect()}
    assert (rows["o1"].quantity, str(rows["o1"].amount), rows["o1"]._corrupt_record) == (3, "9.50", None)
    assert rows["o2"].quantity is None and rows["o2"]._corrupt_record == "o2,x,1.00,2026-11-02T11:00:00Z"
    assert json.loads(rows["o2"]._rescued_data) == {"quantity": "x"}
    assert rows["o3"]._corrupt_record == "o3,1"  # cells short: corrupt, kept whole

    raw = build_registry([kafka_declaration("bronze.raw_orders", topic, format="raw", schema=None)])
    assert run_table(spark, settings, raw.get("bronze.raw_orders")).rows_in == 3
    values = table_format(settings).read(spark, "bronze.raw_orders").orderBy("_kafka_offset").collect()
    assert [r.value for r in values] == ["o1,3,9.50,2026-11-02T10:00:00Z", "o2,x,1.00,2026-11-02T11:00:00Z", "o3,1"]


def test_offsets_expired_from_the_history_are_read_from_the_rows(spark, fresh_settings, broker):
    settings = _with(fresh_settings, broker)
    topic = _topic(broker)
    produce_orders(broker.bootstrap, topic, 0, 60)
    spec = kafka_registry(topic, max_offsets_per_batch=20).get("bronze.orders")
    assert run_table(spark, settings, spec).batches == 4  # 18 offsets a batch (6 per partition), then 6
    fmt, catalog = table_format(settings), settings.catalog_name
    spark.sql(
        f"CALL {catalog}.system.rewrite_data_files(table => 'bronze.orders', options => map('rewrite-all', 'true'))"
    )
    spark.sql(
        f"CALL {catalog}.system.expire_snapshots(table => 'bronze.orders', older_than => TIMESTAMP '2999-01-01', "
        "retain_last => 1)"
    )
    assert fmt.latest_properties(spark, "bronze.orders", OFFSETS_PROPERTY) is None  # only the compaction is left
    produce_orders(broker.bootstrap, topic, 60, 9)
    report = run_table(spark, settings, spec)
    assert report.rows_in == 9
    assert _landed(spark, settings) == _every_offset(topic, {0: 23, 1: 23, 2: 23})
    batches = fmt.read(spark, "bronze.orders").groupBy("_batch_id").count().collect()
    assert sorted(r[0] for r in batches) == [0, 1, 2, 3, 4]  # the new batch follows the last one the rows carry


def test_offsets_the_reader_cannot_fetch_stop_the_batch_with_one_line_and_nothing_written(
    spark, fresh_settings, broker, monkeypatch
):
    import pipelines.sources.kafka as kafka_run

    settings = _with(fresh_settings, broker)
    topic = _topic(broker, partitions=1)
    produce_orders(broker.bootstrap, topic, 0, 5, partitions=1)
    ends = kafka_run.end_offsets
    # Planned beyond what the partition holds: as if the brokers lost messages after the plan was made.
    monkeypatch.setattr(kafka_run, "end_offsets", lambda *a: {k: (lo, hi + 3) for k, (lo, hi) in ends(*a).items()})
    spec = kafka_registry(topic).get("bronze.orders")
    with pytest.raises(PipelineError) as caught:
        run_table(spark, settings, spec)
    message = str(caught.value)
    assert message == (
        f"table bronze.orders: topic {topic} partition 0: offset 5 could not be read (gone from the brokers since "
        "the run was planned, or not answered in time); run again to plan anew (nothing of batch 0 was written)"
    )
    assert table_format(settings).stats(spark, "bronze.orders").rows == 0


MIXED = """
import pipelines.authoring as tb
from tests.support.kafka_registry import ORDERS

tb.landing("bronze.orders", tb.files("orders_files", "json", ORDERS))
tb.flow("bronze.orders", tb.kafka("{topic}", schema=ORDERS, max_offsets_per_batch=50), name="live")
tb.flow("bronze.orders", tb.files("orders_2019", "json", ORDERS), once=True)


@tb.silver(write=tb.dedupe("order_id", time="ordered_at"))
@tb.expect_or_quarantine("quantity_positive", "quantity > 0")
def orders(bronze_orders):
    return bronze_orders
"""
_mixed = itertools.count()


def _mixed_home(tmp_path, settings: Settings, broker: Broker) -> tuple[str, str]:
    """A dataset whose bronze.orders is fed by landed files, a topic and a once-read backfill folder."""
    from tests.support.packages import write_package

    topic = _topic(broker)
    produce_orders(broker.bootstrap, topic, 0, 120)
    package = write_package(tmp_path / "packages", f"mixed{next(_mixed)}", {"tables.py": MIXED.format(topic=topic)})
    for folder, first in (("orders_files", 1000), ("orders_2019", 2000)):
        (settings.landing / folder).mkdir(parents=True)
        lines = [json.dumps(order(i)) for i in range(first, first + 30)]
        (settings.landing / folder / "a.json").write_text("\n".join(lines) + "\n")
    return package, topic


def _order_ids(spark: SparkSession, settings: Settings) -> list[str]:
    return sorted(r[0] for r in table_format(settings).read(spark, "bronze.orders").select("order_id").collect())


EXPECTED_IDS = sorted(f"o{i:06d}" for i in [*range(120), *range(1000, 1030), *range(2000, 2030)])


def test_files_a_topic_and_a_once_folder_feed_one_table_each_row_once_with_numbers_per_flow(
    spark, fresh_settings, broker, tmp_path
):
    from pipelines.authoring.load import load_registry
    from pipelines.run.pipeline import run_pipeline
    from quality.reconcile import pipelines_of, reconcile_pipeline

    settings = _with(fresh_settings, broker)
    package, topic = _mixed_home(tmp_path, settings, broker)
    registry = load_registry([package])
    report = run_pipeline(spark, settings, registry, ["bronze.orders"])[0]
    assert _order_ids(spark, settings) == EXPECTED_IDS
    assert {name: (r.rows_in, r.batches) for name, r in report.flows.items()} == {
        "main": (30, 1),
        "live": (120, 3),
        "orders_2019": (30, 1),
    }
    assert report.rows_in == 180
    bronze = table_format(settings).read(spark, "bronze.orders")
    from_files = bronze.filter("_kafka_topic IS NULL").select("_source_file").distinct().collect()
    assert sorted(r[0].rsplit("/", 2)[-2] for r in from_files) == ["orders_2019", "orders_files"]
    assert bronze.filter(f"_kafka_topic = '{topic}' AND _kafka_offset IS NOT NULL").count() == 120

    produce_orders(broker.bootstrap, topic, 120, 6)
    (settings.landing / "orders_2019" / "b.json").write_text(json.dumps(order(3000)) + "\n")  # never read
    again = run_pipeline(spark, settings, registry)
    flows = again[0].flows
    assert flows["live"].rows_in == 6 and flows["main"].skipped and flows["orders_2019"].skipped
    assert "read once" in (flows["orders_2019"].note or "")
    assert len(_order_ids(spark, settings)) == 186

    result = reconcile_pipeline(spark, settings, pipelines_of(registry)[0])
    landed = result.outcomes[0]
    assert [o.success for o in result.outcomes] == [True] * 4, result.outcomes
    assert landed.element_count == 186 and "flow live: 126 rows from 3 partitions" in landed.observed


@pytest.mark.parametrize("commit", [3, 7])
def test_a_run_of_several_flows_killed_between_or_inside_them_lands_each_row_once(
    spark, fresh_settings, broker, tmp_path, commit
):
    """Commits: the files flow's health and rows (1, 2), the topic's three batches (3-5), the once folder's health
    and rows (6, 7), then its checkpoint and its read-once mark."""
    from pipelines.authoring.load import load_registry
    from pipelines.run.pipeline import run_pipeline

    settings = _with(fresh_settings, broker)
    package, _ = _mixed_home(tmp_path, settings, broker)
    arguments = [settings.catalog_name, broker.bootstrap, str(tmp_path / "packages"), package, "bronze.orders"]
    run_killed_child(settings, "tests.support.flow_child", str(settings.home), *arguments, str(commit))
    registry = load_registry([package])
    report = run_pipeline(spark, settings, registry, ["bronze.orders"])[0]
    assert _order_ids(spark, settings) == EXPECTED_IDS
    assert report.flows["main"].skipped  # its batch was committed before the kill
    again = run_pipeline(spark, settings, registry, ["bronze.orders"])[0]
    assert again.skipped and _order_ids(spark, settings) == EXPECTED_IDS
