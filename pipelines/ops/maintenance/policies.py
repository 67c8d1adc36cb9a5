"""Which tables the registry maintains, and the maintenance policy of each."""

from __future__ import annotations

from infra.errors import ConfigError
from infra.identifiers import validate_table_name
from pipelines.run.run_log import RUN_LOG
from pipelines.spec.registry import Registry
from pipelines.spec.tables import MaintenancePolicy


def maintained_tables(registry: Registry) -> list[tuple[str, MaintenancePolicy]]:
    """Every table the registry writes (extra outputs such as quarantine tables too) with its policy, and the run
    log (`ops.run_log`), whose small appends after every run are compacted and expired like any table's."""
    tables = [(out.name, spec.maintenance) for spec in registry for out in spec.outputs()]
    return [*tables, (RUN_LOG, MaintenancePolicy())]


def policy_for(registry: Registry, table: str) -> MaintenancePolicy:
    """The maintenance policy of `table` (the policy of the spec that writes it), validated."""
    validate_table_name(table)
    for name, policy in maintained_tables(registry):
        if name == table:
            policy.validate(table)
            return policy
    known = ", ".join(name for name, _ in maintained_tables(registry))
    raise ConfigError(f"no table {table!r} in the registry; known tables: {known}")
