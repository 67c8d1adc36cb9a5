"""How Kafka is reached: brokers, time-outs and the client settings passed through to librdkafka (docs/kafka.md).

- `TRIBUTARY_KAFKA_BOOTSTRAP`: the bootstrap servers (`host:port,host:port`; default `127.0.0.1:9092`).
- `TRIBUTARY_KAFKA_TIMEOUT`: seconds a broker may take to answer before a run stops naming the servers (default 30).
- `TRIBUTARY_KAFKA_LAG_THRESHOLD`: messages behind at which the lag sensor starts a run (default 1).
- `TRIBUTARY_KAFKA_CONFIG_<KEY>`: any librdkafka setting, the key upper-cased with `.` written `_`, e.g.
  `TRIBUTARY_KAFKA_CONFIG_SECURITY_PROTOCOL=SASL_SSL`, `TRIBUTARY_KAFKA_CONFIG_SASL_MECHANISMS=PLAIN`,
  `TRIBUTARY_KAFKA_CONFIG_SASL_USERNAME=...`, `TRIBUTARY_KAFKA_CONFIG_SASL_PASSWORD=...`,
  `TRIBUTARY_KAFKA_CONFIG_SSL_CA_LOCATION=/etc/ssl/ca.pem`. Their values are never printed or logged.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any

from infra.errors import ConfigError

CONFIG_PREFIX = "TRIBUTARY_KAFKA_CONFIG_"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
_SERVER = re.compile(r"^[A-Za-z0-9._\-\[\]:]+:[0-9]{1,5}$")
# Settings Tributary decides itself: offsets come from the table, never from the group or an automatic reset.
OWN_KEYS = frozenset({"bootstrap.servers", "group.id", "enable.auto.commit", "auto.offset.reset", "logger"})
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
        client = []
        for name, value in sorted(env.items()):
            if name.startswith(CONFIG_PREFIX) and len(name) > len(CONFIG_PREFIX):
                key = name[len(CONFIG_PREFIX) :].lower().replace("_", ".")
                if key in OWN_KEYS:
                    raise ConfigError(
                        f"{name} sets {key!r}, which Tributary decides (offsets are kept with the table); remove it"
                        + (" and use TRIBUTARY_KAFKA_BOOTSTRAP" if key == "bootstrap.servers" else "")
                    )
                client.append((key, value))
        return cls(
            bootstrap=",".join(servers),
            timeout_seconds=_positive(env, "TRIBUTARY_KAFKA_TIMEOUT", 30),
            lag_threshold=_positive(env, "TRIBUTARY_KAFKA_LAG_THRESHOLD", 1),
            client=tuple(client),
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

    def admin_config(self) -> dict[str, Any]:
        """librdkafka settings of an admin or producer client."""
        return {**dict(self.client), "bootstrap.servers": self.bootstrap, "logger": _log}


def _positive(env: Any, name: str, default: int) -> int:
    raw = env.get(name) or str(default)
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
        raise ConfigError(f"{name} must be a positive integer, got {raw!r}")
    return int(raw)
