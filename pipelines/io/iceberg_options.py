"""The options Iceberg tables are created, written and streamed with."""

from __future__ import annotations

# How a landing batch is written: its rows share one `_ingested_at` day (one timestamp per micro-batch), so each
# task writes its own files, without the shuffle of Iceberg's default hash distribution; fanout keeps any input right.
LANDING_WRITE_OPTIONS = {"distribution-mode": "none", "fanout-enabled": "true"}

# Keep metadata from growing without bound: old metadata.json files are deleted after each commit.
DEFAULT_TABLE_PROPERTIES = {
    "format-version": "2",
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "50",
    "write.parquet.compression-codec": "zstd",
}

# How a stream reads a table's appends.
# - Overwrite and delete snapshots are skipped: only a reprocess or a backfill (`pipelines.ops.reprocess`) makes
#   them, replacing rows the stream has already carried downstream, so re-reading them would add them twice.
# - Splits of 4 MB, the floor of Spark's own file sources, and a file weighed at 1 MB at least. Iceberg's 128 MB
#   default put a first load's few compressed files (a million events in 8 MB of Parquet) into one task, so
#   the micro-batch's scan and rules ran on one core: silver's first load of 1 M events took 4.3 s to validate
#   and count instead of 3.4 s. A small increment's files still make one task.
STREAM_READ_OPTIONS = {
    "streaming-skip-overwrite-snapshots": "true",
    "streaming-skip-delete-snapshots": "true",
    "split-size": str(4 << 20),
    "file-open-cost": str(1 << 20),
}
