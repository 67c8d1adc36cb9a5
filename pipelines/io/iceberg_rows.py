"""Iceberg appends of a few rows the driver holds, committed by pyiceberg, and reads of small tables: no Spark job,
no JVM.

A Spark append of the three rows of a batch's file health costs about half a second (a job, a task, the commit
through the JVM); pyiceberg writes the Parquet file and commits in a few tens of milliseconds. Both commit through
the same catalog database, so Spark sees the snapshot at once (its catalog caches no table).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
from pyiceberg.expressions import AlwaysTrue, In

from infra.catalog import pyiceberg_catalog
from infra.settings import Settings


def append_rows(settings: Settings, name: str, rows: Sequence[Mapping[str, object]], summary: Mapping[str, str]) -> int:
    """Append `rows` to table `name` in one commit whose snapshot summary holds `summary`; return the rows added.

    A commit that loses to another writer of the table is tried again on the table as it then stands by pyiceberg
    itself (the table's `commit.retry.num-retries`, 4 by default).
    """
    table = pyiceberg_catalog(settings).load_table(name)
    table.append(pa.Table.from_pylist(list(rows), schema=table.schema().as_arrow()), snapshot_properties=dict(summary))
    return len(rows)


def read_rows(
    settings: Settings, name: str, columns: Sequence[str], among: tuple[str, Sequence[object]] | None = None
) -> list[dict[str, object]]:
    """The rows of table `name`'s current snapshot, `columns` only, scanned by pyiceberg (delete files applied);
    with `among` (a column, values), only those whose column holds one of the values, files pruned by their
    column bounds."""
    table = pyiceberg_catalog(settings).load_table(name)
    row_filter = In(among[0], set(among[1])) if among else AlwaysTrue()
    return table.scan(row_filter=row_filter, selected_fields=tuple(columns)).to_arrow().to_pylist()
