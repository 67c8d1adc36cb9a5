"""Compaction: rewriting small data files toward the target size, and manifests into few, clustered ones.

Both commit `replace` snapshots, which Iceberg stream readers skip, and never change rows.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from infra.settings import Settings
from pipelines.ops.maintenance.procedures import (
    REWRITE_DATA_FILES,
    REWRITE_MANIFESTS,
    call_procedure,
    int_columns,
    procedure_sql,
)
from pipelines.spec.tables import MaintenancePolicy

MB = 1024 * 1024


def rewrite_data_files(spark: SparkSession, settings: Settings, name: str, policy: MaintenancePolicy) -> dict[str, int]:
    """Compact small files: bin-pack (or sort, if the policy has a sort order) toward the target file size."""
    policy.validate(name)
    options = {
        "min-input-files": str(policy.min_input_files),
        "target-file-size-bytes": str(policy.target_file_size_mb * MB),
    }
    args = {"options": "map(" + ", ".join(f"'{k}', '{v}'" for k, v in options.items()) + ")"}
    if policy.sort_order:
        args = {"strategy": "'sort'", "sort_order": f"'{', '.join(policy.sort_order)}'", **args}
    else:
        args = {"strategy": "'binpack'", **args}
    rows, attempts = call_procedure(
        spark, name, REWRITE_DATA_FILES, procedure_sql(settings, name, REWRITE_DATA_FILES, args)
    )
    return {**int_columns(rows[0]), "attempts": attempts}


def rewrite_manifests(spark: SparkSession, settings: Settings, name: str) -> dict[str, int]:
    """Rewrite manifests so they are few and clustered by partition (faster planning)."""
    rows, attempts = call_procedure(
        spark, name, REWRITE_MANIFESTS, procedure_sql(settings, name, REWRITE_MANIFESTS, {})
    )
    return {**int_columns(rows[0]), "attempts": attempts}
