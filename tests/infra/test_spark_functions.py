"""Tributary's own SQL functions, called as Spark calls them."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from urllib.parse import unquote

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, StringType, StructField, StructType

from infra.spark_functions import batch_time, exact_decimal_function, landed_file_path, with_batch_number


@pytest.mark.parametrize(
    ("text", "declared", "expected"),
    [
        ("10.50", DecimalType(12, 2), Decimal("10.50")),
        ("10.5000000", DecimalType(12, 2), Decimal("10.50")),  # zeros past the scale drop nothing
        ("10.505", DecimalType(12, 2), None),  # a third fractional digit would be rounded away
        ("-0.001", DecimalType(12, 2), None),
        ("-7.25", DecimalType(12, 2), Decimal("-7.25")),
        ("9999999999.99", DecimalType(12, 2), Decimal("9999999999.99")),
        ("9999999999.995", DecimalType(12, 2), None),  # rounding up would not even fit
        (
            "12345678901234567890123456.123456789012",
            DecimalType(38, 12),
            Decimal("12345678901234567890123456.123456789012"),
        ),
        ("0.0000000001", DecimalType(10, 4), None),
        ("42", DecimalType(5, 0), Decimal("42")),
        (None, DecimalType(12, 2), None),
    ],
)
def test_exact_decimal_keeps_a_value_only_when_its_scale_drops_no_digit(
    spark: SparkSession, text: str | None, declared: DecimalType, expected: Decimal | None
) -> None:
    wide = DecimalType(38, 38 - (declared.precision - declared.scale))
    df = spark.createDataFrame([(text,)], StructType([StructField("t", StringType())]))
    name = exact_decimal_function(spark, declared)
    row = df.select(F.call_function(name, F.col("t").cast(wide), F.lit(declared.scale)).alias("v")).first()
    assert row is not None
    assert row.v == expected
    assert (
        df.select(F.call_function(name, F.lit(None).cast(wide), F.lit(declared.scale))).schema[0].dataType == declared
    )


def _generated_code(df: DataFrame) -> list[str]:
    """The Java source Spark generates for `df`'s query."""
    stages = df._jdf.queryExecution().debug().codegenToSeq()
    return [stages.apply(i)._2() for i in range(stages.size())]


def test_batch_constants_hold_their_values_and_leave_the_generated_code_alone(spark: SparkSession) -> None:
    rows = spark.range(3)
    anchor = F.col("id").isNull()

    def stamped(at: datetime, batch: int) -> DataFrame:
        return with_batch_number(rows, "batch", batch).select("id", "batch", batch_time(spark, at, anchor).alias("t"))

    first = datetime(2026, 12, 5, 1, 2, 3, 456789, tzinfo=UTC)
    before_1970 = datetime(1960, 1, 1, 0, 0, 0, 1, tzinfo=UTC)
    got = stamped(first, 7).selectExpr("id", "batch", "unix_micros(t)").collect()
    assert [tuple(r) for r in got] == [(i, 7, 1796432523456789) for i in range(3)]
    assert stamped(before_1970, 2**40).selectExpr("batch", "unix_micros(t)").first() == (2**40, -315619199999999)
    # Another batch runs the code the first compiled; literals would be written into it (the check can fail).
    assert _generated_code(stamped(first, 7)) == _generated_code(stamped(before_1970, 8))
    lit = rows.withColumn("batch", F.lit(7).cast("long"))
    assert _generated_code(lit) != _generated_code(rows.withColumn("batch", F.lit(8).cast("long")))


def test_landed_file_path_is_the_path_metadata_gives_for_every_row(spark: SparkSession, tmp_path: Path) -> None:
    names = ["plain.json", "b é +.json", "p%41 #x.json", "a;b=c&d.json", "ü 日本.json"]
    for i, name in enumerate(names):
        (tmp_path / name).write_text("".join(f'{{"a": {i * 100 + j}}}\n' for j in range(i + 1)))
    read = spark.read.schema("a INT, _corrupt_record STRING").json([str(tmp_path / n) for n in names])
    assert read.rdd.getNumPartitions() < len(names)  # small files share a task: the path changes within it
    both = read.select(
        "a", F.col("_metadata.file_path").alias("metadata"), landed_file_path(F.col("a").isNull()).alias("path")
    )
    rows = both.collect()
    assert len(rows) == 15 and all(r.path == r.metadata for r in rows)
    assert {r.path.rsplit("/", 1)[1] for r in rows} == {
        "plain.json",
        "b%20é%20+.json",
        "p%2541%20%23x.json",
        "a;b=c&d.json",
        "ü%20日本.json",
    }
    assert all(r.a // 100 == names.index(unquote(r.path.rsplit("/", 1)[1])) for r in rows)
    # Deterministic, unlike `input_file_name()`: Spark accepts it in a MERGE's source.
    assert both._jdf.queryExecution().analyzed().deterministic()
    assert not read.select(F.input_file_name())._jdf.queryExecution().analyzed().deterministic()
