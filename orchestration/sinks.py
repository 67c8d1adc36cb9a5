"""Sink assets: one per declared sink (`sink/<name>`), downstream of the table it follows, with one check.

Each delivers what the table changed since the destination's position (`pipelines.deliver.run`) and records the
rows delivered and deleted, the snapshot reached and the seconds. Its check `delivered_every_row` compares the
rows the destination holds with the table's (`pipelines.deliver.run.reconcile`).
"""

# No `from __future__ import annotations`: Dagster inspects the `context` annotation at definition time.

from collections.abc import Iterator

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    MetadataValue,
    Output,
    asset,
)

from infra.errors import TributaryError
from orchestration.assets import asset_key, no_retry_failure
from orchestration.resources import SparkResource
from pipelines.deliver.run import reconcile, run_sink
from pipelines.spec.delivery import SinkSpec
from pipelines.spec.registry import Registry

SINKS_GROUP = "sinks"
DELIVERED_CHECK = "delivered_every_row"


def sink_key(name: str) -> AssetKey:
    """`orders_to_kafka` → AssetKey(["sink", "orders_to_kafka"])."""
    return AssetKey(["sink", name])


def build_sink_asset(sink: SinkSpec, registry: Registry):
    """The asset that runs `sink`."""
    key = sink_key(sink.name)

    @asset(
        key=key,
        deps=[asset_key(sink.table)],
        group_name=SINKS_GROUP,
        kinds={sink.destination.kind},
        description=f"{sink.table}'s changes delivered exactly once to {sink.destination.describe()} "
        f"(declared at {sink.where}; docs/sinks.md).",
        check_specs=[AssetCheckSpec(DELIVERED_CHECK, asset=key, description="the destination holds every row")],
    )
    def _deliver(context: AssetExecutionContext, spark: SparkResource) -> Iterator:
        settings = spark.settings()
        try:
            report = run_sink(None, settings, registry, sink)
            checked = reconcile(settings, registry, sink)
        except TributaryError as exc:
            raise no_retry_failure(exc) from exc
        context.log.info(report.line())
        yield Output(
            None,
            metadata={
                "mode": MetadataValue.text(report.mode),
                "rows_written": MetadataValue.int(report.rows),
                "deleted": MetadataValue.int(report.deleted),
                "not_retracted": MetadataValue.int(report.not_retracted),
                "snapshot": MetadataValue.text(str(report.snapshot)),
                "seconds": MetadataValue.float(report.seconds),
            },
        )
        counts = {
            k: v for k, v in (("table_rows", checked.table_rows), ("held_rows", checked.held_rows)) if v is not None
        }
        yield AssetCheckResult(
            check_name=DELIVERED_CHECK,
            passed=checked.passed,
            severity=AssetCheckSeverity.ERROR,
            description=checked.description,
            metadata={k: MetadataValue.int(v) for k, v in counts.items()},
        )

    return _deliver


def build_sink_assets(registry: Registry) -> list:
    """One asset per declared sink."""
    return [build_sink_asset(sink, registry) for sink in registry.sinks]
