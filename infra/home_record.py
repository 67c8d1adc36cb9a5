"""What a home was created with (`<home>/home.json`): its table format and its catalog.

A home's checkpoints and ledgers describe the tables of one catalog. Run against another catalog, they would say
every file was read while that catalog has no tables, and the run would write empty tables. The first run records
the catalog; a later run against another one refuses, naming both. A home's recorded format is its default when
`TRIBUTARY_TABLE_FORMAT` is not set, so every command on a Delta home reads Delta without being told.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import Callable
from datetime import date
from pathlib import Path

from infra.errors import ConfigError

RECORD = "home.json"


def catalog_identity(home: Path, catalog_uri: str | None, catalog_db: Path) -> str:
    """The catalog a home's tables live in, without secrets: `sqlite:<path>` (relative to the home when inside
    it, so a moved home stays itself) or the JDBC URL without its user, password and options."""
    if catalog_uri is None or catalog_uri.startswith("jdbc:sqlite:"):
        path = Path(catalog_uri.removeprefix("jdbc:sqlite:")) if catalog_uri else catalog_db
        return f"sqlite:{path.relative_to(home) if path.is_relative_to(home) else path}"
    return re.sub(r"//[^/@]*@", "//", catalog_uri.split("?", 1)[0].split(";", 1)[0])


def recorded(home: Path) -> dict[str, str]:
    """The home's record, or {} for a home no run has written to (or an unreadable record)."""
    try:
        data = json.loads((home / RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def recorded_format(home: Path) -> str | None:
    """The table format the home was created with, if recorded."""
    value = recorded(home).get("table_format")
    return value if isinstance(value, str) else None


def check_home(home: Path, table_format: str, catalog: str) -> None:
    """Record a new home's format and catalog; refuse a home whose tables live in another catalog."""
    record = recorded(home)
    if not record:
        _update(home, lambda known: None if known else {"table_format": table_format, "catalog": catalog})
        return
    if record.get("catalog", catalog) != catalog:
        raise ConfigError(
            f"TRIBUTARY_HOME={home} holds the checkpoints of tables in catalog {record['catalog']}, but the catalog "
            f"is now {catalog} (TRIBUTARY_CATALOG_URI): its checkpoints would skip every file already read and write "
            "empty tables; use a new TRIBUTARY_HOME for this catalog, or unset TRIBUTARY_CATALOG_URI"
        )


def move_home(home: Path, catalog: str) -> None:
    """Record that the home's tables now live in `catalog` (after `tributary catalog migrate`)."""
    _update(home, lambda known: {**known, "catalog": catalog})


def first_day(home: Path) -> date | None:
    """The earliest day a day-partitioned table of the home holds data for (see `note_first_day`), if recorded."""
    return _day(recorded(home).get("first_day"))


def _day(value: object) -> date | None:
    try:
        return date.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def note_first_day(home: Path, day: date) -> None:
    """Record `day` as the home's first data day when none earlier is recorded: the daily partitions of its
    day-partitioned tables start there (`orchestration.partitions`)."""

    def earlier(record: dict[str, str]) -> dict[str, str] | None:
        known = _day(record.get("first_day"))
        return {**record, "first_day": day.isoformat()} if known is None or day < known else None

    if earlier(recorded(home)) is not None:  # (the record is read again under the lock)
        _update(home, earlier)


def _update(home: Path, change: Callable[[dict[str, str]], dict[str, str] | None]) -> None:
    """Replace the record by `change(record)` under a lock on the home folder (tables run in parallel), atomically;
    None leaves it as it is."""
    home.mkdir(parents=True, exist_ok=True)
    folder = os.open(home, os.O_RDONLY)  # the home folder itself is the lock: no extra file in it
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        record = change(recorded(home))
        if record is None:
            return
        tmp = home / f".{RECORD}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(record, indent=2) + "\n")
        os.replace(tmp, home / RECORD)
    finally:
        os.close(folder)  # releases the lock
