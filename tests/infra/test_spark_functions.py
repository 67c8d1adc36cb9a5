"""Tributary's own SQL functions, called as Spark calls them."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, StringType, StructField, StructType

from infra.spark_functions import exact_decimal_function


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
