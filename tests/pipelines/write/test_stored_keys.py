"""A validating sink looks stored keys up only within its batch's range of the first key part
(`ValidateDedupeSink._not_stored`): no copy of a stored key passes, whatever the key's type, at the range's ends and
with strings Java orders otherwise than Spark (a private-use character against one beyond the 16-bit range)."""

from __future__ import annotations

from datetime import date, datetime

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DateType, LongType, StringType, StructField, StructType, TimestampType

from infra.settings import Settings
from pipelines.io.formats import table_format
from pipelines.spec.rules import apply_rules
from pipelines.spec.tables import OutputTable
from pipelines.write.sinks import BatchContext
from pipelines.write.validate import ValidateDedupeSink

AT = datetime(2026, 11, 2, 12, 0)


def _keys(kind: str) -> tuple[DataType, list]:
    """A key type and eight of its values in Spark's order (the strings put U+E000 before U+1F600, which Java's
    UTF-16 order reverses)."""
    if kind == "string":
        return StringType(), ["a", "b", "c", "d", "m", "x", "\ue000", "\U0001f600"]
    if kind == "long":
        return LongType(), [-(2**40), -5, 0, 3, 7, 11, 2**40, 2**62]
    if kind == "date":
        return DateType(), [
            date(1, 1, 1),
            date(1999, 12, 31),
            *(date(2026, 1, d) for d in range(1, 6)),
            date(9999, 1, 1),
        ]
    return TimestampType(), [datetime(2026, 1, d, 3) for d in range(1, 9)]


def _batch(spark: SparkSession, schema: StructType, rows: list[tuple]):
    frame = spark.createDataFrame(rows, schema).withColumn("_source_file", F.lit("f"))
    return apply_rules(frame, ())


@pytest.mark.parametrize("kind", ["string", "long", "date", "timestamp"])
def test_no_copy_of_a_stored_key_passes_the_range_lookup(
    spark: SparkSession, format_settings: Settings, tmp_path, kind: str
) -> None:
    key_type, k = _keys(kind)
    schema = StructType(
        [StructField("k", key_type), StructField("v", StringType()), StructField("at", TimestampType())]
    )
    fmt = table_format(format_settings)
    fmt.ensure_table(spark, OutputTable("silver.keyed", schema))
    sink = ValidateDedupeSink(
        "silver.keyed_quarantine", ("k",), "at", ("k", "v", "at"), ("k", "v", "at"), rules=(), order_by=("v",)
    )
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text('{"id": "query-keys"}')
    batches = [
        [(k[0], "first", AT), (k[1], "first", AT)],  # one data file
        [(k[5], "first", AT), (k[7], "first", AT)],  # another, with the range's ends of the last batch
        # Copies of stored keys at both ends of the batch's range, a new key between them sent twice (the first
        # by `order_by` wins).
        [(k[5], "copy", AT), (k[7], "copy", AT), (k[6], "new", AT), (k[6], "newer", AT)],
        # A range that meets the first file at its upper end only, then one that spans both files.
        [(k[2], "new", AT), (k[3], "new", AT), (k[1], "copy", AT)],
        [(k[0], "copy", AT), (k[4], "new", AT), (k[7], "copy", AT)],
    ]
    for batch_id, rows in enumerate(batches):
        ctx = BatchContext(spark, fmt, "silver.keyed", checkpoint, batch_id)
        sink.write(ctx, _batch(spark, schema, rows))
        stats = sink.stats(_batch(spark, schema, rows))
        assert ("key_lo" in stats.asDict()) == (kind != "timestamp")

    stored = sorted((r.k, r.v) for r in fmt.read(spark, "silver.keyed").collect())
    expected = {k[0]: "first", k[1]: "first", k[5]: "first", k[7]: "first", k[6]: "new", k[2]: "new", k[3]: "new"}
    expected[k[4]] = "new"
    assert stored == sorted(expected.items())
