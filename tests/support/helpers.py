"""Small helpers shared by tests: table reads and snapshot bookkeeping."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from infra.settings import Settings
from pipelines.datasets import default_registry
from pipelines.io.formats import table_format

ALL_TABLES = tuple(out.name for spec in default_registry() for out in spec.outputs())


def table(spark: SparkSession, settings: Settings, name: str) -> DataFrame:
    """The current contents of a platform table."""
    return spark.table(table_format(settings).qualified(name))


def snapshot_ids(spark: SparkSession, settings: Settings) -> dict[str, list[int]]:
    """Every snapshot id of every pipeline table, oldest first."""
    fmt = table_format(settings)
    return {
        name: [
            r.snapshot_id
            for r in spark.sql(
                f"SELECT snapshot_id FROM {fmt.qualified(name)}.snapshots ORDER BY committed_at"
            ).collect()
        ]
        for name in ALL_TABLES
    }


def rows_of(df: DataFrame, drop: tuple[str, ...] = ("_ingested_at",)) -> list[tuple]:
    """The rows of `df` without volatile columns, sorted (a multiset fingerprint)."""
    cols = [c for c in df.columns if c not in drop]
    return sorted((tuple(r) for r in df.select(*cols).collect()), key=repr)
