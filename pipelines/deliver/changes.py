"""What a sink owes its destination: the followed table's changes between the destination's position and the
table's current commit, read with the table format's own history (no checkpoint of its own to keep in step)."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.io.format_types import CHANGE_IMAGE, TableFormat
from pipelines.io.table_changes import NetChanges, net_changes
from pipelines.spec.delivery import Delivery, Destination, Position, SinkError, SinkSpec

# Columns of Tributary's own bookkeeping that are not the table's rows.
_INTERNAL = "_tributary_"


def current_position(fmt: TableFormat, table: str) -> Position | None:
    """The followed table's current commit (read without a JVM where the format can); None before its first."""
    snapshot = fmt.current_snapshot(None, table)
    if snapshot is None:
        return None
    return Position(fmt.table_id(None, table), snapshot.snapshot_id)


def _rows(df: DataFrame) -> DataFrame:
    return df.select(*[c for c in df.columns if not c.startswith(_INTERNAL) and c != CHANGE_IMAGE])


def pending(
    spark: Callable[[], SparkSession],
    fmt: TableFormat,
    sink: SinkSpec,
    appends_only: bool,
    since: Position | None,
    until: Position,
) -> tuple[Delivery, NetChanges | None]:
    """The delivery that brings `sink`'s destination from `since` to `until`, and the cached change rows it reads
    (the caller unpersists them after delivering).

    A first delivery (or one after the table was created again) hands over every row. After that, a table that
    only appends hands over the rows its commits appended; any other commit (a MERGE, a reprocess) hands over the
    net changes: rows as they are now, and for a destination with keys the keys of the rows that are gone.
    """
    session = spark()
    table, destination = sink.table, sink.destination
    if since is None or since.table_id != until.table_id:
        return Delivery(sink.name, table, _rows(fmt.read(session, table, until.snapshot)), None, since, until), None
    if appends_only:
        appended = fmt.appended_rows(session, table, since.snapshot, until.snapshot)
        if appended is not None:
            return Delivery(sink.name, table, _rows(appended), None, since, until), None
    net = net_changes(session, fmt, table, since.snapshot, until.snapshot)
    if net.rows is None:
        raise SinkError(
            f"sink {sink.name}: the changes of {table} since snapshot {since.snapshot} cannot be read "
            f"({net.unreadable}); nothing was delivered to {destination.describe()}. Maintenance may have expired "
            "that snapshot: keep snapshots longer (maintenance snapshot_retention_days), or deliver the table again "
            "from its start by clearing the destination's position (docs/sinks.md)"
        )
    new = _rows(net.rows.filter(F.col(CHANGE_IMAGE) == "new"))
    old = _rows(net.rows.filter(F.col(CHANGE_IMAGE) == "old"))
    return _keyed(sink.name, table, destination, new, old, since, until), net


def _keyed(
    name: str, table: str, destination: Destination, new: DataFrame, old: DataFrame, since: Position, until: Position
) -> Delivery:
    keys = list(destination.keys)
    if not keys:
        return Delivery(name, table, new, None, since, until, not_retracted=old.count())
    gone = old.select(*keys).distinct().join(new.select(*keys), keys, "left_anti")
    return Delivery(name, table, new, gone, since, until)
