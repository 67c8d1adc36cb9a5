"""A MERGE into a table without data files (a first load) is an append of the rows the MERGE would insert."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql.types import BooleanType, IntegerType, StringType, StructField, StructType

from infra.settings import Settings
from pipelines.io.formats import Merge, table_format
from pipelines.spec.tables import OutputTable
from pipelines.write.sinks import BatchContext

TARGET = StructType([StructField("k", StringType()), StructField("v", IntegerType())])
SOURCE = StructType([*TARGET.fields, StructField("gone", BooleanType())])
# A delete clause, an update clause and an insert clause that skips deleted keys and one source column.
MERGE = Merge(("k",), delete_when="s.gone", update_when="s.v > t.v", insert_when="NOT s.gone", columns=("k", "v"))


def _rows(spark: SparkSession, fmt, name: str) -> list[tuple]:
    return sorted((r.k, r.v) for r in fmt.read(spark, name).collect())


def test_a_first_merge_appends_what_the_merge_inserts_once_per_batch(
    spark: SparkSession, format_settings: Settings, tmp_path
) -> None:
    fmt = table_format(format_settings)
    for name in ("silver.merged", "silver.appended"):
        fmt.ensure_table(spark, OutputTable(name, TARGET))
    source = spark.createDataFrame([("a", 1, False), ("b", 2, True), ("c", 3, False)], SOURCE)

    checkpoint = tmp_path / "checkpoint"  # a streaming query's: its id names the writer
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text('{"id": "query-1"}')

    fmt.merge(source, "silver.merged", MERGE)  # the statement itself, into an empty table
    ctx = BatchContext(spark, fmt, "silver.appended", checkpoint, batch_id=0)
    ctx.merge(source, "silver.appended", MERGE, upserted=3)
    assert _rows(spark, fmt, "silver.appended") == _rows(spark, fmt, "silver.merged") == [("a", 1), ("c", 3)]
    assert fmt.committed_batches(spark, "silver.appended", ctx.writer) == {0}  # an append tagged with its batch
    assert ctx.metrics == {"rows_written:silver.appended": 2}

    # The batch replayed after a crash finds the rows: the MERGE runs and changes nothing.
    replay = BatchContext(spark, fmt, "silver.appended", checkpoint, batch_id=0)
    replay.merge(source, "silver.appended", MERGE, upserted=3)
    assert _rows(spark, fmt, "silver.appended") == [("a", 1), ("c", 3)]

    # The next batch merges: an update, a delete and an insert.
    later = spark.createDataFrame([("a", 5, False), ("c", 0, True), ("d", 4, False)], SOURCE)
    nxt = BatchContext(spark, fmt, "silver.appended", checkpoint, batch_id=1)
    nxt.merge(later, "silver.appended", MERGE, upserted=3)
    assert _rows(spark, fmt, "silver.appended") == [("a", 5), ("d", 4)]
    assert nxt.metrics == {"rows_upserted:silver.appended": 3}
