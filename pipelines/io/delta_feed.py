"""Delta's change data feed: every table records its changes, so that a table reading it follows its updates and
deletes (`DeltaFormat.change_feed`)."""

from __future__ import annotations

from pathlib import Path

from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.io.format_types import CHANGE_IMAGE

FEED_PROPERTY = "delta.enableChangeDataFeed"
CHANGE_FEED = {FEED_PROPERTY: "true"}
# The columns Delta's change data feed adds to a table's own.
_FEED_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


def records_changes(table: DeltaTable) -> bool:
    """Whether the Delta table records its changes (its change data feed is on)."""
    return table.metadata().configuration.get(FEED_PROPERTY, "false").lower() == "true"


def read_change_feed(spark: SparkSession, location: Path, since: int, until: int) -> DataFrame:
    """The change data feed of the versions after `since` up to `until`, each row marked as an old or a new image:
    a MERGE's changed rows (pre and post images, deletes), an append's or an overwrite's whole files; OPTIMIZE
    versions are not listed."""
    feed = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", str(since + 1))
        .option("endingVersion", str(until))
        .load(str(location))
    )
    added = F.col("_change_type").isin("insert", "update_postimage")
    data = [c for c in feed.columns if c not in _FEED_COLUMNS]
    return feed.select(*data, F.when(added, "new").otherwise("old").alias(CHANGE_IMAGE))
