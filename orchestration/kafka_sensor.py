"""The Kafka lag sensor: starts the pipeline for Kafka-fed tables that are behind their topics (docs/kafka.md).

It asks the brokers for end offsets and reads the table's committed offsets from its commit metadata (no JVM),
every few seconds; a table whose lag reaches `TRIBUTARY_KAFKA_LAG_THRESHOLD` messages is run with everything
downstream of it. The same lag never launches twice (the run key is the table's offsets and lag).
"""

from __future__ import annotations

import hashlib
import json

from dagster import DefaultSensorStatus, RunRequest, SensorDefinition, SensorEvaluationContext, SkipReason, sensor

from infra.errors import TributaryError, first_line
from infra.settings import Settings
from orchestration.assets import asset_key
from orchestration.resources import SparkResource
from orchestration.sensors import TRIGGER_TAG, tick_spacing
from pipelines.sources.kinds import kind_of
from pipelines.spec.registry import Registry

KAFKA_LAG_SENSOR = "tributary_kafka_lag_sensor"


def build_kafka_lag_sensor(registry: Registry, job, settings: Settings) -> SensorDefinition | None:
    """A running-by-default sensor over the registry's Kafka-fed tables (None when there are none)."""
    specs = [s for s in registry if any(kind_of(f.source).has_lag for f in s.all_flows())]
    if not specs:
        return None

    @sensor(
        name=KAFKA_LAG_SENSOR,
        job=job,
        minimum_interval_seconds=tick_spacing(settings.sensor_interval_seconds),
        default_status=DefaultSensorStatus.RUNNING,
        description=(
            "Asks the Kafka brokers for end offsets every few seconds (no JVM) and launches the pipeline for the "
            "Kafka-fed tables at least TRIBUTARY_KAFKA_LAG_THRESHOLD messages behind, and what reads them."
        ),
    )
    def _lag(context: SensorEvaluationContext, spark: SparkResource) -> RunRequest | SkipReason:
        current = spark.settings()
        behind: dict[str, dict[str, int]] = {}
        for spec in specs:
            try:
                lag: dict[tuple[str, int], int] = {}
                for flow in spec.all_flows():
                    lag.update(kind_of(flow.source).partition_lag(current, spec, flow.name))
            except TributaryError as exc:
                return SkipReason(first_line(exc))
            if sum(lag.values()) >= current.kafka.lag_threshold:
                behind[spec.name] = {f"{t}/{p}": n for (t, p), n in sorted(lag.items())}
        if not behind:
            return SkipReason(f"no Kafka-fed table is {current.kafka.lag_threshold} or more messages behind")
        total = sum(sum(parts.values()) for parts in behind.values())
        context.log.info(f"Kafka lag {total} message(s): {', '.join(sorted(behind))}")
        chain = registry.downstream_closure(behind)
        return RunRequest(
            run_key=hashlib.sha256(json.dumps(behind, sort_keys=True).encode()).hexdigest(),
            asset_selection=[asset_key(out.name) for spec in chain for out in spec.outputs()],
            tags={TRIGGER_TAG: KAFKA_LAG_SENSOR, "tributary/kafka_lag": str(total)},
        )

    return _lag
