"""JVM options for the test suite's short-lived child processes."""

from __future__ import annotations

from infra.spark import DRIVER_JAVA_OPTIONS

# A child's JVM (a CLI run, a Dagster run, a killed child) lives for seconds to a minute: without the optimizing
# JIT compiler and with the single-threaded collector it did the same work in 20-25 % less time here (a cold
# gold.user_visits child: 22 s against 16.5 s, three runs each; every demo table on tiny data, cold: 56 s against
# 42 s), as the two compete with the run for this machine's two cores. A long-lived JVM (the test session's own,
# a user's runs) is faster with them (the same tables warm: 30 s against 40 s), so only children get this.
# Without tiers the JVM reserves 48 MB for compiled code, which the S3 demo's every-table run filled under a parallel
# suite ("Out of space in CodeCache for adapters", a VirtualMachineError that ends the JVM): 240 MB, the tiered
# default, keeps the room.
_SHORT_LIVED_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
# A test cluster's executors live as long as the run that asked for them: the same options (ignored in local mode).
SHORT_LIVED_JVM = f"{DRIVER_JAVA_OPTIONS}={_SHORT_LIVED_OPTIONS},spark.executor.extraJavaOptions={_SHORT_LIVED_OPTIONS}"


def short_lived(env: dict[str, str]) -> dict[str, str]:
    """`env` with `SHORT_LIVED_JVM` added to its `TRIBUTARY_SPARK_CONF` (after any given there)."""
    given = env.get("TRIBUTARY_SPARK_CONF")
    return {**env, "TRIBUTARY_SPARK_CONF": f"{given},{SHORT_LIVED_JVM}" if given else SHORT_LIVED_JVM}
