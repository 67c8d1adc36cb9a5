"""Spark settings chosen for speed, each with what it was measured to save (`infra.spark` applies them)."""

from __future__ import annotations

from py4j.java_gateway import java_import
from pyspark.sql import SparkSession

from infra.settings import Settings

# Classes PySpark names by their short name on each call (`sc._jvm.functions.col` for every `F.col`,
# `sc._jvm.PythonUtils.toSeq`): py4j resolves a short name by trying it in the default package and under each of
# PySpark's star imports in turn, each miss a lookup through all of the driver's ~255 jars; a single import is
# found first (`F.col` 0.6-1.7 ms per call before, 0.2 ms after; ~650 such calls in one increment of the demo).
SHORT_NAMED_CLASSES = ("org.apache.spark.sql.functions", "org.apache.spark.api.python.PythonUtils")

CHECKPOINT_FILE_MANAGER = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"


def speed_conf(settings: Settings) -> dict[str, str]:
    """The Spark settings that make the platform's own work faster than Spark's defaults do."""
    return {
        # A micro-batch is cached only for the few actions of one batch write; compressing the cache cost more
        # than it saved (silver on 1 M rows: 22.5 s compressed, 15.8 s not; bench.pipeline stages).
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        # Spark keeps the last 100 classes it generated and compiled (one per whole-stage plan, projection,
        # ordering); one increment through the demo's event tables needs about 145, so every run of a table
        # compiled its plans again (146 compiles, 1.3-1.8 s of a ~10 s increment here). A whole demo run needs
        # about 400 distinct classes; with room for 1000 the next run compiles only the plans whose literals
        # changed (9 for the same increment). Metaspace stayed at 68 MB either way.
        "spark.sql.codegen.cache.maxEntries": "1000",
        # delta-spark rebuilds a table's state (log replay) in 50 tasks by default, cold in every new JVM and again
        # after each commit, and a MERGE then writes a checksum (.crc) file by computing the state once more. On a
        # Delta home's CDC table (165 changes, two MERGEs) that was 50 s of a first run; with the table's shuffle
        # parallelism and no .crc (optional in the Delta protocol; delta-rs commits never write one) it is 31 s.
        "spark.databricks.delta.snapshotPartitions": str(settings.shuffle_partitions),
        "spark.databricks.delta.writeChecksumFile.enabled": "false",
        # Every micro-batch writes three checkpoint files (the file source's log, the offsets, the commit) through
        # a checkpoint file manager; Spark's default (Hadoop's FileContext) took about 30 ms per file on a local
        # disk, the FileSystem one about 8 ms: a tiny stream's trigger 160 ms -> 85 ms. Both write a temporary
        # file and rename it (atomic on a local disk and on HDFS), and a table's lock keeps a second writer off
        # its checkpoint.
        "spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_FILE_MANAGER,
    }


def import_short_named_classes(session: SparkSession) -> None:
    """Import `SHORT_NAMED_CLASSES` singly into the session's py4j view."""
    for name in SHORT_NAMED_CLASSES:
        java_import(session.sparkContext._jvm, name)
