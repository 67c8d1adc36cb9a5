"""Iceberg commits that carry Tributary's properties in their snapshot summary, where Spark's writer takes none."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.io.format_types import Merge


def merge(df: DataFrame, target: str, merge: Merge, properties: Mapping[str, str] | None) -> None:
    """`MERGE INTO target`; `properties` go into its snapshot's summary through infra/jvm `CommitProperties` (a
    MERGE takes no write options)."""
    if not properties:
        merge.run(df, target)
        return
    helper = df.sparkSession._jvm.tributary.write.CommitProperties  # type: ignore[union-attr]
    merge.run(df, target, lambda built: helper.merge(built._jwriter, dict(properties)))


def overwrite(df: DataFrame, target: str, properties: Mapping[str, str] | None) -> None:
    """One overwrite commit replacing every row of `target`, with `properties` in its summary."""
    writer = df.writeTo(target)
    for key, value in (properties or {}).items():
        writer = writer.option(f"snapshot-property.{key}", value)
    writer.overwrite(F.lit(True))
