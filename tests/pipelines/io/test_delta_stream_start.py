"""Where a new stream over a Delta table starts: at version 0 when the table's versions replay to its rows (no
snapshot to build first), from delta-spark's snapshot otherwise, and as its first attempt planned when it re-runs
an uncommitted first batch."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from pipelines.io import delta_source
from pipelines.io.checkpoints import last_committed_batch, pending_batch
from pipelines.io.delta import DeltaFormat
from pipelines.io.delta_source import replays_from_start
from pipelines.spec.tables import OutputTable

SCHEMA = StructType([StructField("id", LongType()), StructField("name", StringType())])


def _rows(ids: range) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "name": pa.array([str(i) for i in ids])})


def _appended(path: Path, appends: int = 3) -> DeltaTable:
    for n in range(appends):
        write_deltalake(str(path), _rows(range(n * 10, n * 10 + 10)), mode="append")
    return DeltaTable(str(path))


def test_only_a_log_of_appends_since_the_first_version_replays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    assert replays_from_start(tmp_path / "plain", _appended(tmp_path / "plain").version())

    deleted = _appended(tmp_path / "deleted")
    deleted.delete("id = 3")  # a version removing a file (as a MERGE or an overwrite does)
    assert not replays_from_start(tmp_path / "deleted", deleted.version())

    compacted = _appended(tmp_path / "compacted")
    compacted.optimize.compact()  # no data change, but the replaced files may be vacuumed
    assert not replays_from_start(tmp_path / "compacted", compacted.version())

    _appended(tmp_path / "widened")
    wider = _rows(range(100, 102)).append_column("extra", pa.array(["a", "b"]))
    write_deltalake(str(tmp_path / "widened"), wider, mode="append", schema_mode="merge")
    assert not replays_from_start(tmp_path / "widened", DeltaTable(str(tmp_path / "widened")).version())

    cleaned = _appended(tmp_path / "cleaned")
    cleaned.create_checkpoint()
    (tmp_path / "cleaned" / "_delta_log" / f"{0:020d}.json").unlink()  # what log clean-up does after a checkpoint
    assert not replays_from_start(tmp_path / "cleaned", cleaned.version())

    long = _appended(tmp_path / "long")
    monkeypatch.setattr(delta_source, "_REPLAY_VERSIONS", long.version() - 1)
    assert not replays_from_start(tmp_path / "long", long.version())


def _fail(df, batch_id):
    raise RuntimeError("killed in the first batch")


def _stream(spark, fmt: DeltaFormat, checkpoint: Path, read: list[int], fail: bool = False) -> bool:
    """Run the stream at `checkpoint` into `read`; whether it was set to start at version 0."""

    def batch(df, batch_id):
        if fail:
            _fail(df, batch_id)
        read.extend(r.id for r in df.collect())

    stream = fmt.read_stream(spark, "bronze.items", checkpoint)
    query = (
        stream.writeStream.foreachBatch(batch)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    if fail:
        with pytest.raises(Exception, match="killed in the first batch"):
            query.awaitTermination()
    else:
        query.awaitTermination()
    relation = stream._jdf.queryExecution().analyzed().collectLeaves().head()  # Spark 4: the analyzed source
    options = relation.dataSource().options().toString()  # the source's options
    return "startingVersion -> 0" in options


def test_a_new_stream_reads_an_append_only_table_from_version_0_and_a_changed_one_from_its_snapshot(
    spark, fresh_settings
):
    fmt = DeltaFormat(replace(fresh_settings, table_format="delta"))
    fmt.ensure_table(spark, OutputTable("bronze.items", SCHEMA))
    for batch in range(3):
        fmt.append(
            spark.range(batch * 10, batch * 10 + 10).select("id", F.lit("x").alias("name")), "bronze.items", "w", batch
        )

    read: list[int] = []
    assert _stream(spark, fmt, fresh_settings.home / "from-0", read)
    assert sorted(read) == list(range(30))

    # A delete: a new stream starts from the snapshot (versions 0 on would carry the deleted row).
    fmt.delta_table("bronze.items").delete("id = 5")
    read.clear()
    assert not _stream(spark, fmt, fresh_settings.home / "from-snapshot", read)
    assert sorted(read) == [i for i in range(30) if i != 5]
    # The first stream, resumed, reads the next append only (the delete's version is skipped).
    fmt.append(spark.range(100, 103).select("id", F.lit("y").alias("name")), "bronze.items", "w", 3)
    read.clear()
    assert not _stream(spark, fmt, fresh_settings.home / "from-0", read)
    assert sorted(read) == [100, 101, 102]


def test_a_first_batch_run_again_reads_what_its_first_attempt_planned(spark, fresh_settings):
    fmt = DeltaFormat(replace(fresh_settings, table_format="delta"))
    fmt.ensure_table(spark, OutputTable("bronze.items", SCHEMA))
    for batch in range(3):
        fmt.append(
            spark.range(batch * 10, batch * 10 + 10).select("id", F.lit("x").alias("name")), "bronze.items", "w", batch
        )
    # A first batch planned inside the snapshot (one file of it), as a stream started by an earlier release did:
    # its re-run starts from the snapshot again although the table replays.
    inside = fresh_settings.home / "inside-snapshot"
    path = str(fmt.location("bronze.items"))
    planned = spark.readStream.format("delta").option("skipChangeCommits", "true").option("maxFilesPerTrigger", "1")
    query = planned.load(path).writeStream.foreachBatch(_fail).option("checkpointLocation", str(inside))
    with pytest.raises(Exception, match="killed in the first batch"):
        query.trigger(availableNow=True).start().awaitTermination()
    read: list[int] = []
    assert not _stream(spark, fmt, inside, read)
    assert sorted(read) == list(range(30))

    checkpoint = fresh_settings.home / "killed"
    read.clear()
    assert _stream(spark, fmt, checkpoint, read, fail=True)
    assert pending_batch(checkpoint) == 0 and last_committed_batch(checkpoint) is None
    # The table stops replaying from version 0 before the re-run; the re-run still reads as planned.
    fmt.delta_table("bronze.items").delete("id = 5")
    assert not replays_from_start(fmt.location("bronze.items"), fmt.delta_table("bronze.items").version())
    _stream(spark, fmt, checkpoint, read)
    assert sorted(read) == list(range(30))
    assert pending_batch(checkpoint) is None
