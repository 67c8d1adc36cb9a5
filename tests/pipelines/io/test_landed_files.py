"""The files we count as landed are exactly the files Spark's file stream reads from a landing folder."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

from pyspark.sql import SparkSession

from infra.paths import canonical
from pipelines.io.file_source_log import seen_files
from pipelines.io.landing import landed_paths

LINE = b'{"order_id": "x"}\n'
# Names Spark reads (suffixes that look temporary included) and names it skips (hidden, in flight).
READ = ("a.json", "b.json.tmp", "c.json.part", "d~", "e.json.crc", "_f=1.json", "_metadata.json", "_common_metadata")
SKIPPED = (".g.json", "_h.json", ".i.json.tmp", "j.json._COPYING_")


def test_landed_files_are_the_files_spark_reads(spark: SparkSession, tmp_path: Path) -> None:
    folder = tmp_path / "landing" / "orders"
    (folder / "sub").mkdir(parents=True)
    for name in (*READ, *SKIPPED, "sub/k.json"):
        (folder / name).write_bytes(LINE)
    (folder / "empty.json").write_bytes(b"")
    (folder / "packed.json.gz").write_bytes(gzip.compress(LINE))
    os.symlink(folder / "a.json", folder / "link.json")  # read by Spark, but never landed: a run refuses it

    checkpoint = tmp_path / "checkpoint"
    query = (
        spark.readStream.format("text")
        .load(str(folder))
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()

    landed = {canonical(str(p)) for p in landed_paths(folder)}
    assert landed == set(seen_files(checkpoint))  # the link's path resolves to a.json
    assert sorted(p.name for p in landed_paths(folder)) == sorted([*READ, "empty.json", "packed.json.gz"])
