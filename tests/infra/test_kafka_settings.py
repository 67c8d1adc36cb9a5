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
    with pytest.raises(ConfigError) as caught:
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


def test_spark_connector_gets_the_same_brokers_and_credentials_as_java_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("TRIBUTARY_KAFKA_BOOTSTRAP", "b1:9093")
    monkeypatch.setenv("TRIBUTARY_KAFKA_TIMEOUT", "7")
    monkeypatch.setenv("TRIBUTARY_KAFKA_CONFIG_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("TRIBUTARY_KAFKA_CONFIG_SASL_MECHANISMS", "SCRAM-SHA-512")
    monkeypatch.setenv("TRIBUTARY_KAFKA_CONFIG_SASL_USERNAME", "svc")
    monkeypatch.setenv("TRIBUTARY_KAFKA_CONFIG_SASL_PASSWORD", 'pa"ss\\word')
    monkeypatch.setenv("TRIBUTARY_KAFKA_CONFIG_SSL_CA_LOCATION", "/etc/ssl/ca.pem")
    monkeypatch.setenv("TRIBUTARY_KAFKA_CONFIG_DEBUG", "all")  # librdkafka only: not given to the Java client
    monkeypatch.setenv("TRIBUTARY_KAFKA_JAVA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM", "")
    kafka = Settings.from_env(home=tmp_path).kafka
    options = kafka.reader_options((("client.id", "orders"),))
    assert options == {
        "kafka.bootstrap.servers": "b1:9093",
        "kafka.request.timeout.ms": "7000",
        "kafka.default.api.timeout.ms": "7000",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="svc" '
        'password="pa\\"ss\\\\word";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/etc/ssl/ca.pem",
        "kafka.ssl.endpoint.identification.algorithm": "",
        "kafka.isolation.level": "read_committed",
        "kafka.client.id": "orders",
    }
    assert 'pa"ss' not in repr(kafka) and "svc" not in repr(kafka)
    monkeypatch.setenv("TRIBUTARY_KAFKA_JAVA_KEY_DESERIALIZER", "x")
    with pytest.raises(ConfigError, match=r"TRIBUTARY_KAFKA_JAVA_KEY_DESERIALIZER sets 'key\.deserializer'"):
        Settings.from_env(home=tmp_path)
