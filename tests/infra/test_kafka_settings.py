"""Kafka settings: checked before anything connects, credentials passed to librdkafka and never shown."""

from __future__ import annotations

import pytest

from infra.errors import ConfigError
from infra.kafka import KafkaSettings
from infra.settings import Settings
from pipelines.io.kafka_plan import Range, batches


def test_client_settings_pass_through_and_never_show(monkeypatch, tmp_path):
    monkeypatch.setenv("TRIBUTARY_KAFKA_BOOTSTRAP", "b1:9093, b2:9093")
    monkeypatch.setenv("TRIBUTARY_KAFKA_CONFIG_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("TRIBUTARY_KAFKA_CONFIG_SASL_PASSWORD", "hunter2-secret")
    settings = Settings.from_env(home=tmp_path)
    config = settings.kafka.consumer_config("g")
    assert config["bootstrap.servers"] == "b1:9093,b2:9093"
    assert config["security.protocol"] == "SASL_SSL" and config["sasl.password"] == "hunter2-secret"
    assert config["auto.offset.reset"] == "error" and config["enable.auto.commit"] is False
    assert "hunter2" not in repr(settings) and "hunter2" not in str(settings.kafka)


@pytest.mark.parametrize(
    "name,value,expected",
    [
        ("TRIBUTARY_KAFKA_BOOTSTRAP", "broker-without-port", "TRIBUTARY_KAFKA_BOOTSTRAP='broker-without-port'"),
        ("TRIBUTARY_KAFKA_TIMEOUT", "0", "TRIBUTARY_KAFKA_TIMEOUT must be a positive integer"),
        ("TRIBUTARY_KAFKA_CONFIG_GROUP_ID", "mine", "sets 'group.id', which Tributary decides"),
        ("TRIBUTARY_KAFKA_CONFIG_BOOTSTRAP_SERVERS", "x:1", "use TRIBUTARY_KAFKA_BOOTSTRAP"),
    ],
)
def test_a_bad_kafka_setting_names_itself(monkeypatch, tmp_path, name, value, expected):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match="") as caught:
        Settings.from_env(home=tmp_path)
    assert expected in str(caught.value)


def test_batches_share_the_limit_across_partitions_in_offset_order():
    ranges = [Range("t", 0, 0, 250), Range("t", 1, 100, 110), Range("t", 2, 5, 5)]
    cut = batches(ranges, 100)
    assert all(sum(r.size for r in batch) <= 100 for batch in cut)
    for partition, (start, end) in {0: (0, 250), 1: (100, 110)}.items():
        pieces = [r for batch in cut for r in batch if r.partition == partition]
        assert [p.start for p in pieces] == [start, *[p.end for p in pieces[:-1]]] and pieces[-1].end == end
    assert not [r for batch in cut for r in batch if r.partition == 2]
    assert len(batches([Range("t", p, 0, 1) for p in range(5)], 2)) == 3  # a limit below the partition count
    assert KafkaSettings().bootstrap == "127.0.0.1:9092"
