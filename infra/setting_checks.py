"""Checks of setting values (memory sizes, Spark masters, addresses, counts): each failure is a `ConfigError`
naming the setting and a value that would work."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable

from infra.errors import ConfigError


def require_positive_int(setting: str, value: str) -> int:
    """`value` as an int, or `ConfigError` naming `setting` when it is not a positive integer."""
    if not (value.isascii() and value.isdigit()) or int(value) < 1:
        raise ConfigError(f"{setting} must be a positive integer, got {value!r}")
    return int(value)


# JVM heap sizes as `-Xmx` takes them: a whole number and a unit (k, m, g, t); Spark needs a 450m heap or more.
_MEMORY = re.compile(r"([1-9][0-9]*)([kmgt])", re.IGNORECASE)
_MEMORY_UNITS = "kmgt"
_MIN_DRIVER_MEMORY_MB = 450
# Masters Spark 4.1 accepts: local threads (and failures), local-cluster, standalone, YARN, Kubernetes.
_MASTER = re.compile(
    r"local(\[([1-9][0-9]*|\*)(\s*,\s*[1-9][0-9]*)?\])?"
    r"|local-cluster\[\s*[1-9][0-9]*\s*,\s*[1-9][0-9]*\s*,\s*[1-9][0-9]*\s*\]"
    r"|spark://[^\s/:,]+:[0-9]+(,[^\s/:,]+:[0-9]+)*"
    r"|yarn|k8s://\S+"
)
_HOST_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*")


def check_memory(setting: str, value: str) -> None:
    """`ConfigError` unless `value` is a JVM heap size of at least 450m."""
    match = _MEMORY.fullmatch(value)
    if not match:
        raise ConfigError(
            f"{setting}={value!r} is not a JVM memory size; use a whole number and a unit k, m, g or t, e.g. 512m or 4g"
        )
    megabytes = int(match[1]) * 1024 ** _MEMORY_UNITS.index(match[2].lower()) / 1024
    if megabytes < _MIN_DRIVER_MEMORY_MB:
        raise ConfigError(
            f"{setting}={value!r} is too small: Spark needs at least {_MIN_DRIVER_MEMORY_MB}m; use e.g. 512m or 4g"
        )


def check_master(setting: str, value: str) -> None:
    """`ConfigError` unless `value` is a Spark master URL."""
    if not _MASTER.fullmatch(value):
        raise ConfigError(
            f"{setting}={value!r} is not a Spark master URL; use local, local[N], local[*], local[N,F], "
            "spark://host:port, yarn or k8s://https://host:port"
        )


def check_address(setting: str, value: str) -> None:
    """`ConfigError` unless `value` is an IP address or a host name."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        if not _HOST_NAME.fullmatch(value):
            raise ConfigError(
                f"{setting}={value!r} is not an IP address or host name; use e.g. 127.0.0.1 (this machine "
                "only) or the address cluster executors reach the driver on"
            ) from None


# Spark keys that Tributary sets from its own variables: in `TRIBUTARY_SPARK_CONF` they obey the same rule.
SPARK_KEYS: dict[str, tuple[str, Callable[[str, str], object]]] = {
    "spark.master": ("TRIBUTARY_SPARK_MASTER", check_master),
    "spark.driver.memory": ("TRIBUTARY_DRIVER_MEMORY", check_memory),
    "spark.sql.shuffle.partitions": ("TRIBUTARY_SHUFFLE_PARTITIONS", require_positive_int),
    "spark.driver.bindAddress": ("TRIBUTARY_BIND_ADDRESS", check_address),
    "spark.driver.host": ("TRIBUTARY_BIND_ADDRESS", check_address),
    "spark.executor.memory": ("TRIBUTARY_EXECUTOR_MEMORY", check_memory),
    "spark.executor.cores": ("TRIBUTARY_EXECUTOR_CORES", require_positive_int),
    "spark.cores.max": ("TRIBUTARY_MAX_CORES", require_positive_int),
}
