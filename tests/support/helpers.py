"""Small helpers shared by tests: landed files, table reads and snapshot bookkeeping."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from infra.settings import Settings
from pipelines.datasets import default_registry
from pipelines.io.formats import table_format

ALL_TABLES = tuple(out.name for spec in default_registry() for out in spec.outputs())


def land_files(folder: Path, files: dict[str, bytes]) -> list[Path]:
    """Write each `files` entry (name -> bytes) into `folder` (created if missing); the paths, in that order."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in files.items():
        (folder / name).write_bytes(data)
        paths.append(folder / name)
    return paths


def table(spark: SparkSession, settings: Settings, name: str) -> DataFrame:
    """The current contents of a platform table."""
    return table_format(settings).read(spark, name)


def current_snapshots(spark: SparkSession, settings: Settings) -> dict[str, int | None]:
    """The current snapshot (Delta: version) of every pipeline table that exists."""
    fmt = table_format(settings)
    out = {}
    for name in ALL_TABLES:
        if fmt.exists(spark, name):
            snapshot = fmt.current_snapshot(spark, name)
            out[name] = None if snapshot is None else snapshot.snapshot_id
    return out


def rows_of(df: DataFrame, drop: tuple[str, ...] = ("_ingested_at",)) -> list[tuple]:
    """The rows of `df` without volatile columns, sorted (a multiset fingerprint)."""
    cols = [c for c in df.columns if c not in drop]
    return sorted((tuple(r) for r in df.select(*cols).collect()), key=repr)


def compiled_classes(spark: SparkSession) -> int:
    """Classes Spark's code generator has compiled in this JVM (a cached class is not compiled again)."""
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics  # type: ignore[union-attr]
    return metrics.METRIC_COMPILATION_TIME().getCount()
