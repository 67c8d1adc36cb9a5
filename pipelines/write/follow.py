"""What a table downstream of a changing table (upsert, CDC, replace, recompute) is handed to follow its changes,
and the one MERGE every following strategy ends with.

The source kind (`pipelines.sources.table_changes`) reads the upstream's net changes since the table's last run
and hands them over as an `UpstreamChange`; the table's strategy (`Sink.follow`) decides what they mean for its
rows: `replace` recomputes the whole result, `recompute(by=...)` the groups the old and the new images touch,
`upsert` the rows of the upstream keys that changed. Each recomputes from the upstream as it is, so a change read
twice (a run killed after its commit, before it recorded its position) writes the same rows again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.io.format_types import CHANGE_IMAGE, Merge

if TYPE_CHECKING:
    from pipelines.write.sinks import BatchContext

# A row of a following MERGE's source that deletes its key from the table.
_GONE = "_tributary_gone"


@dataclass
class UpstreamChange:
    """The upstream's changes since the table's last run, and its inputs as they are now.

    `changed` holds the upstream's changed rows, each `old` or `new` (`CHANGE_IMAGE`); None when they are not
    known (a first run, a position maintenance has expired), and then the table is recomputed whole.
    `inputs()` are the function's inputs read whole (the upstream first, at the commit the change runs up to).
    """

    upstream: str
    changed: DataFrame | None
    inputs: Callable[[], list[DataFrame]]
    transform: Callable[..., DataFrame]
    # The upstream table's key columns (empty: it declares none).
    upstream_keys: tuple[str, ...] = ()

    def images(self, image: str) -> DataFrame:
        """The changed rows as they were (`old`) or are (`new`), in the upstream's columns."""
        assert self.changed is not None
        return self.changed.filter(F.col(CHANGE_IMAGE) == image).drop(CHANGE_IMAGE)

    def result(self) -> DataFrame:
        """The table's whole result: the function over its inputs as they are now."""
        return self.transform(*self.inputs())


def in_groups(df: DataFrame, by: Sequence[str], groups: list[dict]) -> DataFrame:
    """The rows of `df` whose `by` values are those of one of `groups` (dicts by column)."""
    if len(by) == 1:
        return df.filter(F.col(by[0]).isin([g[by[0]] for g in groups]))
    spark: SparkSession = df.sparkSession
    return df.join(spark.createDataFrame(groups).select(*by), list(by), "left_semi")


def overwrite(ctx: BatchContext, rows: DataFrame) -> None:
    """Replace the table's rows with `rows` in one commit, counting them."""
    rows = rows.persist()
    try:
        n = rows.count()
        ctx.fmt.overwrite(rows, ctx.table)
    finally:
        rows.unpersist()
    ctx.metrics[f"rows_upserted:{ctx.table}"] += n


def merge_with_deletes(
    ctx: BatchContext, rows: DataFrame, gone: DataFrame, keys: tuple[str, ...], update_when: str | None = None
) -> None:
    """One MERGE by `keys`: `rows` updated or inserted, the stored rows of `gone` (same columns) deleted."""
    columns = tuple(ctx.fmt.columns(ctx.spark, ctx.table))
    source = (
        rows.select(*columns)
        .withColumn(_GONE, F.lit(False))
        .unionByName(gone.select(*columns).withColumn(_GONE, F.lit(True)))
        .persist()
    )
    try:
        counts = source.agg(F.count(F.when(~F.col(_GONE), 1)).alias("rows"), F.count(F.when(F.col(_GONE), 1))).first()
        if not counts[0] and not counts[1]:
            return
        newer = f"NOT s.{_GONE}" + (f" AND ({update_when})" if update_when else "")
        merge = Merge(
            keys,
            null_safe_keys=True,
            delete_when=f"s.{_GONE}",
            update_when=newer,
            insert_when=f"NOT s.{_GONE}",
            columns=columns,
        )
        ctx.merge(source, ctx.table, merge, upserted=counts[0])
        ctx.metrics[f"rows_deleted:{ctx.table}"] += counts[1]
    finally:
        source.unpersist()
