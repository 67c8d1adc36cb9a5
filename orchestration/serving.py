"""Serving assets: one per served table (`serve/<namespace>/<table>`), downstream of the table's asset.

Each brings the table's PostgreSQL copy to the table's current snapshot (`infra.serving.sync`) and records the
synced snapshot, its rows (`table_rows`), the rows changed (`rows_written`: inserted, updated and deleted) and the lag
from the table's commit. When nothing serves tables (no
`TRIBUTARY_SERVE_URL` and the home's server is not running) the asset is skipped, saying so.
"""

# No `from __future__ import annotations`: Dagster inspects the `context` annotation at definition time.

from collections.abc import Iterator

from dagster import AssetExecutionContext, AssetKey, MetadataValue, Output, asset

from infra.errors import TributaryError
from infra.serving.config import ServeSettings
from orchestration.assets import asset_key, no_retry_failure
from orchestration.resources import SparkResource
from pipelines.ops.serve import served_specs, sync_spec
from pipelines.spec.registry import Registry
from pipelines.spec.tables import TableSpec

SERVING_GROUP = "serving"


def serving_key(table: str) -> AssetKey:
    """`gold.daily_revenue` → AssetKey(["serve", "gold", "daily_revenue"])."""
    return AssetKey(["serve", *table.split(".")])


def build_serving_asset(spec: TableSpec):
    """The asset that syncs `spec`'s table into the serving database."""

    @asset(
        key=serving_key(spec.name),
        deps=[asset_key(spec.name)],
        group_name=SERVING_GROUP,
        kinds={"postgres"},
        description=f"{spec.name} served in PostgreSQL for SQL clients (docs/analysts.md).",
        output_required=False,
    )
    def _serve(context: AssetExecutionContext, spark: SparkResource) -> Iterator[Output]:
        try:
            report = sync_spec(spark.settings(), ServeSettings.from_env(), spec)
        except TributaryError as exc:
            raise no_retry_failure(exc) from exc
        if report is None:
            context.log.info(f"{spec.name} not served: no serving server runs (tributary serve start)")
            return
        yield Output(
            None,
            metadata={
                "snapshot": MetadataValue.text(report.snapshot),
                # Named like the table assets' numbers, so that run summaries show them in the same columns.
                "table_rows": MetadataValue.int(report.rows),
                "rows_written": MetadataValue.int(report.inserted + report.updated + report.deleted),
                "mode": MetadataValue.text(report.mode),
                "inserted": MetadataValue.int(report.inserted),
                "updated": MetadataValue.int(report.updated),
                "deleted": MetadataValue.int(report.deleted),
                "seconds": MetadataValue.float(report.seconds),
                **({"lag_seconds": MetadataValue.float(report.lag_seconds)} if report.lag_seconds is not None else {}),
            },
        )

    return _serve


def build_serving_assets(registry: Registry) -> list:
    """One serving asset per served table."""
    return [build_serving_asset(spec) for spec in served_specs(registry)]
