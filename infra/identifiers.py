"""Validation of table identifiers before they reach SQL."""

from __future__ import annotations

import re

from infra.errors import ConfigError

_PART = re.compile(r"^[a-z][a-z0-9_]*$")


def validate_table_name(name: str) -> tuple[str, str]:
    """Return (namespace, table) for `namespace.table`, or raise naming the bad identifier."""
    parts = name.split(".") if isinstance(name, str) else []
    if len(parts) != 2 or not all(_PART.match(p) for p in parts):
        raise ConfigError(
            f"table name {name!r} is not a valid identifier: expected 'namespace.table' where each part "
            "matches ^[a-z][a-z0-9_]*$ (e.g. 'silver.events')"
        )
    return parts[0], parts[1]
