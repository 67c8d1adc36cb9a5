"""The rows a registry table's commits removed and added between two of its commits, netted: read from its change
feed (Iceberg's changelog, Delta's change data feed; `TableFormat.change_feed`).

A copy-on-write commit (every MERGE here) lists every row of each file it rewrote, the rows it left as they were
too, once removed and once added: those pairs cancel out, so what is left is each row as it was before the range
(`old`) and as it is after it (`new`), for the rows that changed. A row updated twice in the range shows once old
and once new; a row added and deleted within it not at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, MapType, StructType

from infra.errors import first_line
from pipelines.io.format_types import CHANGE_IMAGE, TableFormat

_NET = "_tributary_net"


@dataclass
class NetChanges:
    """The changed rows of a range (persisted: the caller unpersists them), or why the range cannot be read."""

    rows: DataFrame | None
    count: int = 0
    unreadable: str | None = None

    def unpersist(self) -> None:
        """Free the cached rows."""
        if self.rows is not None:
            self.rows.unpersist()


def net_changes(spark: SparkSession, fmt: TableFormat, name: str, since: int, until: int) -> NetChanges:
    """The rows of `name` that the commits after `since` up to `until` changed, each `old` or `new`
    (`CHANGE_IMAGE`). When the feed cannot be read (`since` expired by maintenance, a Delta version that recorded
    no changes, a history rolled back past `since`), `rows` is None and `unreadable` says why."""
    try:
        feed = fmt.change_feed(spark, name, since, until)
        data = [c for c in feed.columns if c != CHANGE_IMAGE]
        if _comparable(feed.schema):
            # Each distinct row counted +1 per added copy, -1 per removed one: no filter on the change type
            # reaches Iceberg's changelog scan, which fails to evaluate one (apache/iceberg#13092).
            sign = F.when(F.col(CHANGE_IMAGE) == "new", 1).otherwise(-1)
            counted = feed.groupBy(*data).agg(F.sum(sign).alias(_NET)).filter(F.col(_NET) != 0)
            image = F.when(F.col(_NET) > 0, F.lit("new")).otherwise(F.lit("old")).alias(CHANGE_IMAGE)
            copies = F.explode(F.array_repeat(F.lit(1), F.abs(F.col(_NET)).cast("int"))).alias(_NET)
            rows = counted.select(*data, image, copies).drop(_NET)
        else:  # a map column: no grouping, every listed row counts as changed
            rows = feed
        rows = rows.persist()
        count = rows.count()
    except (CapturedException, Py4JJavaError) as exc:
        return NetChanges(None, unreadable=first_line(exc))
    return NetChanges(rows, count)


def _comparable(schema: DataType) -> bool:
    if isinstance(schema, MapType):
        return False
    if isinstance(schema, StructType):
        return all(_comparable(f.dataType) for f in schema.fields)
    inner = getattr(schema, "elementType", None)
    return inner is None or _comparable(inner)
