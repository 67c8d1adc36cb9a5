"""How Kafka is reached: brokers, time-outs and the client settings passed through to librdkafka (docs/kafka.md).

- `TRIBUTARY_KAFKA_BOOTSTRAP`: the bootstrap servers (`host:port,host:port`; default `127.0.0.1:9092`).
- `TRIBUTARY_KAFKA_TIMEOUT`: seconds a broker may take to answer before a run stops naming the servers (default 30).
- `TRIBUTARY_KAFKA_LAG_THRESHOLD`: messages behind at which the lag sensor starts a run (default 1).
- `TRIBUTARY_KAFKA_CONFIG_<KEY>`: any librdkafka setting, the key upper-cased with `.` written `_`, e.g.
  `TRIBUTARY_KAFKA_CONFIG_SECURITY_PROTOCOL=SASL_SSL`, `TRIBUTARY_KAFKA_CONFIG_SASL_MECHANISMS=PLAIN`,
  `TRIBUTARY_KAFKA_CONFIG_SASL_USERNAME=...`, `TRIBUTARY_KAFKA_CONFIG_SASL_PASSWORD=...`,
  `TRIBUTARY_KAFKA_CONFIG_SSL_CA_LOCATION=/etc/ssl/ca.pem`. Their values are never printed or logged.
  The driver plans with librdkafka (confluent-kafka); the executors read with Spark's Kafka connector (the Java
  client), which gets the same settings translated (`java_client_settings`).
- `TRIBUTARY_KAFKA_JAVA_<KEY>`: a Java client setting for Spark's connector only, over the translated ones (e.g.
  `TRIBUTARY_KAFKA_JAVA_SSL_KEYSTORE_LOCATION`), for what librdkafka names differently or lacks.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any

from infra.errors import ConfigError

CONFIG_PREFIX = "TRIBUTARY_KAFKA_CONFIG_"
JAVA_PREFIX = "TRIBUTARY_KAFKA_JAVA_"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
_SERVER = re.compile(r"^[A-Za-z0-9._\-\[\]:]+:[0-9]{1,5}$")
# Settings Tributary decides itself: offsets come from the table, never from the group or an automatic reset.
OWN_KEYS = frozenset({"bootstrap.servers", "group.id", "enable.auto.commit", "auto.offset.reset", "logger"})
# Spark's connector decides these for its reader; offsets come from the table's plan.
JAVA_OWN_KEYS = frozenset({"key.deserializer", "value.deserializer", "auto.offset.reset"})
_RENAMED = {"sasl.mechanisms": "sasl.mechanism"}
_LIBRDKAFKA_ONLY = frozenset(
    {"sasl.username", "sasl.password", "socket.timeout.ms", "debug", "statistics.interval.ms", "api.version.request"}
)
# librdkafka logs to stderr by default; its messages go to this logger (debug) instead.
_log = logging.getLogger("tributary.kafka.client")


@dataclass(frozen=True)
class KafkaSettings:
    """The brokers and client settings of every Kafka source (one cluster per home)."""

    bootstrap: str = DEFAULT_BOOTSTRAP
    timeout_seconds: int = 30
    lag_threshold: int = 1
    # librdkafka settings from `TRIBUTARY_KAFKA_CONFIG_*` (credentials among them): kept out of every repr.
    client: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    # Java client settings from `TRIBUTARY_KAFKA_JAVA_*`, for Spark's connector only (credentials too).
    java: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> KafkaSettings:
        """Read the `TRIBUTARY_KAFKA_*` variables; raise ConfigError naming a bad one."""
        env = os.environ if environ is None else environ
        bootstrap = env.get("TRIBUTARY_KAFKA_BOOTSTRAP") or DEFAULT_BOOTSTRAP
        servers = [s.strip() for s in bootstrap.split(",")]
        bad = [s for s in servers if not _SERVER.match(s)]
        if bad:
            raise ConfigError(
                f"TRIBUTARY_KAFKA_BOOTSTRAP={bootstrap!r}: {bad[0]!r} is not host:port "
                "(expected e.g. 'broker1:9092,broker2:9092')"
            )
        return cls(
            bootstrap=",".join(servers),
            timeout_seconds=_positive(env, "TRIBUTARY_KAFKA_TIMEOUT", 30),
            lag_threshold=_positive(env, "TRIBUTARY_KAFKA_LAG_THRESHOLD", 1),
            client=_prefixed(env, CONFIG_PREFIX, OWN_KEYS),
            java=_prefixed(env, JAVA_PREFIX, OWN_KEYS | JAVA_OWN_KEYS),
        )

    def consumer_config(self, group: str, options: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
        """librdkafka settings of a consumer that reads offsets it is told (never commits by itself), with a source's
        own `options` (which may not set the keys Tributary decides)."""
        return {
            **dict(self.client),
            **dict(options),
            "bootstrap.servers": self.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            # Reading from an offset retention has deleted is an error, never a silent jump.
            "auto.offset.reset": "error",
            "socket.timeout.ms": self.timeout_seconds * 1000,
            "logger": _log,
        }

    def reader_options(self, options: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
        """Options of Spark's Kafka connector (`kafka.`-prefixed Java client settings) that reach the same brokers
        as `consumer_config`: the librdkafka settings translated where the Java client names them otherwise,
        passed by name where both share it, and `TRIBUTARY_KAFKA_JAVA_*` settings on top."""
        java = java_client_settings({**dict(self.client), **dict(options)})
        java.setdefault("isolation.level", "read_committed")  # librdkafka's default, the Java client's is not
        java.update(dict(self.java))
        timeout_ms = str(self.timeout_seconds * 1000)
        java.update({"bootstrap.servers": self.bootstrap, "request.timeout.ms": timeout_ms})
        java.setdefault("default.api.timeout.ms", timeout_ms)
        return {f"kafka.{key}": value for key, value in java.items()}

    def admin_config(self) -> dict[str, Any]:
        """librdkafka settings of an admin or producer client."""
        return {**dict(self.client), "bootstrap.servers": self.bootstrap, "logger": _log}


def _prefixed(env: Any, prefix: str, own: frozenset[str]) -> tuple[tuple[str, str], ...]:
    """The `<prefix><KEY>` variables as (key, value), key lower-cased with `_` read as `.`; one Tributary decides is
    refused by name."""
    found = []
    for name, value in sorted(env.items()):
        if name.startswith(prefix) and len(name) > len(prefix):
            key = name[len(prefix) :].lower().replace("_", ".")
            if key in own:
                raise ConfigError(
                    f"{name} sets {key!r}, which Tributary decides (offsets are kept with the table); remove it"
                    + (" and use TRIBUTARY_KAFKA_BOOTSTRAP" if key == "bootstrap.servers" else "")
                )
            found.append((key, value))
    return tuple(found)


def java_client_settings(librdkafka: dict[str, str]) -> dict[str, str]:
    """The Java client's settings for librdkafka's: renamed, SASL credentials as a JAAS line, a PEM CA file as a PEM
    trust store; settings the two clients name alike pass unchanged, librdkafka-only ones are left out."""
    java: dict[str, str] = {}
    for key, value in librdkafka.items():
        if key in _RENAMED:
            java[_RENAMED[key]] = value
        elif key == "ssl.ca.location":
            java.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": value})
        elif key not in _LIBRDKAFKA_ONLY:
            java[key] = value
    if "sasl.username" in librdkafka and "sasl.jaas.config" not in java:
        mechanism = java.get("sasl.mechanism", "PLAIN")
        module = "scram.ScramLoginModule" if mechanism.startswith("SCRAM") else "plain.PlainLoginModule"
        user, password = (_jaas_quoted(librdkafka.get(k, "")) for k in ("sasl.username", "sasl.password"))
        java["sasl.jaas.config"] = (
            f'org.apache.kafka.common.security.{module} required username="{user}" password="{password}";'
        )
        java["sasl.mechanism"] = mechanism
    return java


def _jaas_quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _positive(env: Any, name: str, default: int) -> int:
    raw = env.get(name) or str(default)
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
        raise ConfigError(f"{name} must be a positive integer, got {raw!r}")
    return int(raw)
