"""A landing batch's per-file figures observed while it is written equal the figures of one aggregation over
its rows, and are refused (the batch is read back) when they cannot be exact."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from pyspark.sql import Observation
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from pipelines.io.sources import batch_read_files, read_batch_by_reader
from pipelines.sources.file_stats import (
    KEY_BITS,
    OBSERVED_FILES,
    file_stats,
    observed_figures,
    observed_files,
    read_observed,
)
from pipelines.spec.sources import FileSource
from pipelines.write.observed import observed

# The ingestion time the batches read here are stamped with.
AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

SCHEMA = StructType([StructField("id", LongType()), StructField("name", StringType())])
SOURCE = FileSource("items", "json", SCHEMA)


def _observed(spark, frame, files, out):
    """Observed while written as Parquet (a file-source write, as a Delta table's batch is staged)."""
    observation = Observation()
    observed_frame = frame.observe(observation, *observed_figures(SOURCE, observed_files(spark, files)))
    observed_frame.write.mode("overwrite").parquet(str(out))
    return observed(observation)


def test_observed_figures_equal_the_grouped_ones_and_are_refused_when_a_row_is_not_of_the_batch(spark, tmp_path):
    clean, dirty = tmp_path / "clean.json", tmp_path / "dirty file.json"
    clean.write_text("".join(f'{{"id": {i}, "name": "n{i}"}}\n' for i in range(50)))
    dirty.write_text('{"id": 1}\n{"id": "x", "name": "a"}\n{"id": 2, "extra": 5}\n{"id": 3, "more": [1]}\n{"id"\n')
    files = [str(clean), str(dirty)]
    lines = batch_read_files(spark, SOURCE, files).withColumn("_ingested_at", F.current_timestamp())
    by_reader = read_batch_by_reader(spark, SOURCE, None, files, lambda: lines, AT)
    assert by_reader is not None and by_reader[1] == 1  # the clean file by Spark's reader, the other per line
    frame = by_reader[0]

    metrics = _observed(spark, frame, files, tmp_path / "out")
    got = read_observed(observed_files(spark, files), metrics)
    want = sorted(file_stats(frame, SOURCE), key=lambda s: s.file)
    assert got == want
    by_name = {s.file.rsplit("/", 1)[-1]: s for s in got}
    assert (by_name["clean.json"].rows, by_name["clean.json"].corrupt) == (50, 0)
    dirty_stats = by_name["dirty%20file.json"]
    assert (dirty_stats.rows, dirty_stats.corrupt, dirty_stats.rescued) == (5, 2, 3)
    assert dirty_stats.new_fields == ["extra", "more"]

    # A row of a file the batch does not name cannot be counted under one of its files: refused, not misread.
    only_clean = [str(clean)]
    others = _observed(spark, frame, only_clean, tmp_path / "out")
    assert read_observed(observed_files(spark, only_clean), others) is None
    assert read_observed(observed_files(spark, files), None) is None
    # Each file's bin key is the one Spark computes for its rows' `_source_file`.
    keys = frame.select(F.xxhash64("_source_file").alias("h")).distinct().collect()
    assert {r.h & KEY_BITS for r in keys} == set(observed_files(spark, files).keys)
    assert observed_files(spark, [f"{clean}{i}" for i in range(OBSERVED_FILES + 1)]) is None
    assert observed_files(spark, [str(clean), str(clean)]) is None  # two files with one key
    assert observed_figures(SOURCE, None) == []


def test_files_the_proof_counted_are_observed_without_counting_their_rows_again(spark, tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text('{"id": 1}\n\n{"id": "x"}\r\n{"id": 3}\n')
    b.write_text("".join(f'{{"id": {i}}}\n' for i in range(7)))
    files = [str(a), str(b)]
    lines = batch_read_files(spark, SOURCE, files).withColumn("_ingested_at", F.current_timestamp())
    by_reader = read_batch_by_reader(spark, SOURCE, None, files, lambda: lines, AT)
    assert by_reader is not None and by_reader.files == 2 and by_reader.records == {str(a): 3, str(b): 7}
    counted = observed_files(spark, files, by_reader.records)
    assert counted.records == (3, 7)
    names = [c._jc.toString() for c in observed_figures(SOURCE, counted)]
    assert not any("rows_per_file" in n for n in names)  # no histogram of every row
    observation = Observation()
    by_reader.frame.observe(observation, *observed_figures(SOURCE, counted)).write.format("noop").mode(
        "overwrite"
    ).save()
    metrics = observed(observation)
    got = read_observed(counted, metrics)
    assert got == sorted(file_stats(by_reader.frame, SOURCE), key=lambda s: s.file)
    assert [(s.rows, s.corrupt) for s in got] == [(3, 1), (7, 0)]
    # Counts that do not add up to the rows observed are refused: the batch is read back.
    assert read_observed(replace(counted, records=(3, 6)), metrics) is None
    # A batch with a file the proof did not count is observed in full.
    assert observed_files(spark, files, {str(a): 3}).records is None
