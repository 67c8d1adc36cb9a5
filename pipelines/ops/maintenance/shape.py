"""A table's shape: data files, sizes, manifests, snapshots and rows from its metadata, and its bytes on disk."""

from __future__ import annotations

import os
from dataclasses import dataclass

from pyspark.sql import SparkSession

from infra.errors import PipelineError
from infra.object_store import ObjectStore, is_object_url
from infra.paths import local_path
from infra.settings import Settings
from pipelines.io.formats import table_format


@dataclass(frozen=True)
class TableShape:
    """What a table looks like on disk and in its metadata (the numbers maintenance changes)."""

    data_files: int
    data_bytes: int
    avg_file_bytes: int
    manifests: int
    snapshots: int
    rows: int
    bytes_on_disk: int | None


def table_location(spark: SparkSession, settings: Settings, name: str) -> str:
    """The table's root location URI."""
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {table_format(settings).qualified(name)}").collect()
    for row in rows:
        if row.col_name == "Location":
            return row.data_type
    raise PipelineError(f"table {name}: DESCRIBE TABLE EXTENDED reports no location")


def bytes_on_disk(location: str, store: ObjectStore | None = None) -> int | None:
    """Bytes of every file under a table location: a local folder, or a prefix in `store`'s bucket (None for
    other remote storage)."""
    if store is not None and is_object_url(location):
        return store.total_bytes(location)
    root = local_path(location)
    if root is None:
        return None
    total = 0
    for folder, _, files in os.walk(root):
        for file in files:
            try:
                total += os.stat(os.path.join(folder, file)).st_size
            except FileNotFoundError:  # deleted by a concurrent commit or expiry while walking
                continue
    return total


def table_shape(spark: SparkSession, settings: Settings, name: str, location: str | None = None) -> TableShape:
    """Data files, sizes, manifests, snapshots and rows from Iceberg metadata tables (no data scan)."""
    qualified = table_format(settings).qualified(name)
    files = spark.sql(
        f"SELECT count(*) AS n, coalesce(sum(record_count), 0) AS r, coalesce(sum(file_size_in_bytes), 0) AS b "
        f"FROM {qualified}.data_files"
    ).collect()[0]
    manifests = spark.sql(f"SELECT count(*) AS n FROM {qualified}.manifests").collect()[0].n
    snapshots = spark.sql(f"SELECT count(*) AS n FROM {qualified}.snapshots").collect()[0].n
    n, data_bytes = int(files.n), int(files.b)
    return TableShape(
        data_files=n,
        data_bytes=data_bytes,
        avg_file_bytes=data_bytes // n if n else 0,
        manifests=int(manifests),
        snapshots=int(snapshots),
        rows=int(files.r),
        bytes_on_disk=bytes_on_disk(location or table_location(spark, settings, name), settings.object_store),
    )
