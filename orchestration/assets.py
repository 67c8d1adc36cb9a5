"""Asset factory: one Dagster asset per registry table (a multi-asset where a spec writes several tables)."""

from __future__ import annotations

from collections.abc import Iterator

from dagster import AssetKey, AssetSpec, MaterializeResult, MetadataValue, multi_asset

from orchestration.resources import SparkResource
from pipelines.registry import Registry, TableSpec
from pipelines.runner import RunReport, run_table
from pipelines.summary import table_numbers

KINDS = {"spark", "iceberg"}


def asset_key(table: str) -> AssetKey:
    """`silver.events` → AssetKey(["silver", "events"])."""
    return AssetKey(table.split("."))


def report_metadata(report: RunReport, table: str) -> dict[str, MetadataValue]:
    """The run's numbers for one table as Dagster metadata (ints and floats are plotted by the UI)."""
    meta: dict[str, MetadataValue] = {}
    for key, value in table_numbers(report, table).items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            meta[key] = MetadataValue.text(str(value))
        elif isinstance(value, int):
            meta[key] = MetadataValue.int(value)
        else:
            meta[key] = MetadataValue.float(value)
    return meta


def build_table_asset(spec: TableSpec):
    """The asset (or multi-asset) that runs one spec incrementally."""
    deps = [asset_key(spec.upstream)] if spec.upstream else []
    specs = [
        AssetSpec(
            key=asset_key(out.name),
            deps=deps,
            group_name=spec.layer,
            kinds=KINDS,
            description=spec.description if out is spec.output else f"Rows rejected by {spec.name}'s rules.",
            metadata={"table": out.name, "partitioned_by": ", ".join(out.partition_by) or "none"},
        )
        for out in spec.outputs()
    ]

    @multi_asset(name=spec.name.replace(".", "__"), specs=specs, compute_kind=None)
    def _asset(spark: SparkResource) -> Iterator[MaterializeResult]:
        report = run_table(spark.session(), spark.settings(), spec)
        for out in spec.outputs():
            yield MaterializeResult(asset_key=asset_key(out.name), metadata=report_metadata(report, out.name))

    return _asset


def build_table_assets(registry: Registry) -> list:
    """One asset definition per spec in the registry."""
    return [build_table_asset(spec) for spec in registry]
