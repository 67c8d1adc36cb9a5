"""Validation of table and column identifiers before they reach SQL."""

from __future__ import annotations

import re

from infra.errors import ConfigError

_PART = re.compile(r"^[a-z][a-z0-9_]*$")
# A column name that may be written into SQL unquoted: what every spec, rule and sink column must match.
COLUMN_PATTERN = r"[a-z_][a-z0-9_]*"
_COLUMN = re.compile(rf"^{COLUMN_PATTERN}$")


def is_column_name(name: str) -> bool:
    """Whether `name` is a plain lower-case column identifier."""
    return isinstance(name, str) and bool(_COLUMN.match(name))


def check_column_names(names: tuple[str, ...] | list[str]) -> None:
    """Raise ConfigError naming the first name that is not a plain column identifier."""
    for name in names:
        if not is_column_name(name):
            raise ConfigError(f"column name {name!r} is not a valid identifier")


def validate_table_name(name: str) -> tuple[str, str]:
    """Return (namespace, table) for `namespace.table`, or raise naming the bad identifier."""
    parts = name.split(".") if isinstance(name, str) else []
    if len(parts) != 2 or not all(_PART.match(p) for p in parts):
        raise ConfigError(
            f"table name {name!r} is not a valid identifier: expected 'namespace.table' where each part "
            "matches ^[a-z][a-z0-9_]*$ (e.g. 'silver.events')"
        )
    return parts[0], parts[1]
