"""Delta Lake maintenance, planned only: the statements that carry out a policy on a Delta table."""

from __future__ import annotations

from infra.errors import ConfigError
from infra.identifiers import validate_table_name
from pipelines.spec.tables import MaintenancePolicy


def delta_maintenance_sql(table: str, policy: MaintenancePolicy, catalog: str = "spark_catalog") -> list[str]:
    """The Delta Lake statements that carry out `policy` (Delta's jars are not available here, so this only plans).

    OPTIMIZE compacts small files (ZORDER BY the sort-order columns, if any; Delta has no sort direction there).
    VACUUM deletes both files of expired versions and untracked (orphan) files, with one threshold: the longer of
    the two retentions. Delta keeps versions by time only, so `min_snapshots_to_keep` has no equivalent, and
    manifests have none either (Delta checkpoints its log by itself).
    """
    ns, name = validate_table_name(table)
    policy.validate(table)
    if not catalog.isidentifier():
        raise ConfigError(f"catalog name {catalog!r} is not an identifier")
    qualified = f"{catalog}.{ns}.{name}"
    keep_days = max(policy.snapshot_retention_days, policy.orphan_retention_days)
    optimize = f"OPTIMIZE {qualified}"
    if policy.sort_order:
        optimize += f" ZORDER BY ({', '.join(item.split()[0] for item in policy.sort_order)})"
    return [
        f"ALTER TABLE {qualified} SET TBLPROPERTIES ("
        f"'delta.logRetentionDuration' = 'interval {policy.snapshot_retention_days} days', "
        f"'delta.deletedFileRetentionDuration' = 'interval {keep_days} days')",
        optimize,
        f"VACUUM {qualified} RETAIN {keep_days * 24} HOURS",
    ]
