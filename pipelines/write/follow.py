"""What a table downstream of a changing table (upsert, CDC, replace, recompute) is handed to follow its changes.

The source kind (`pipelines.sources.table_changes`) reads the upstream's net changes since the table's last run
and hands them over as an `UpstreamChange`; the table's strategy (`Sink.follow`) decides what they mean for its
rows: `replace` recomputes the whole result, `recompute(by=...)` the groups the old and the new images touch,
`upsert` the rows of the upstream keys that changed. Each recomputes from the upstream as it is, so a change read
twice (a run killed after its commit, before it recorded its position) writes the same rows again. Each ends
with one commit: an overwrite, or a MERGE that also deletes (`BatchContext.overwrite`, `merge_with_deletes`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.io.format_types import CHANGE_IMAGE


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
