"""`ensure_table` on a table that already stands as declared reads its local metadata and asks Spark nothing; any
difference still goes through Spark, which adds a declared column or names the changed type."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from infra.errors import ConfigError
from infra.settings import Settings
from infra.sql.catalog import CatalogReader
from pipelines.io.formats import table_format
from pipelines.spec.tables import OutputTable

WIDE = StructType(
    [
        StructField("flag", BooleanType()),
        StructField("n", IntegerType()),
        StructField("big", LongType()),
        StructField("x", DoubleType()),
        StructField("amount", DecimalType(12, 2)),
        StructField("day", DateType()),
        StructField("at", TimestampType()),
        StructField("local_at", TimestampNTZType()),
        StructField("name", StringType()),
        StructField("tags", ArrayType(StringType())),
        StructField("scores", MapType(StringType(), LongType())),
        StructField("place", StructType([StructField("city", StringType()), StructField("zip", IntegerType())])),
    ]
)


def test_local_metadata_names_types_as_spark_does(spark: SparkSession, fresh_settings: Settings) -> None:
    fmt = table_format(fresh_settings)
    fmt.ensure_table(spark, OutputTable("silver.wide", WIDE))
    spark_types = {f.name: f.dataType.simpleString() for f in spark.table(fmt.qualified("silver.wide")).schema}
    assert CatalogReader(fresh_settings).metadata("silver.wide").spark_columns() == spark_types

    fmt.ensure_table(None, OutputTable("silver.wide", WIDE))  # type: ignore[arg-type]  # nothing asked of Spark


def test_a_table_that_differs_still_goes_through_spark(spark: SparkSession, fresh_settings: Settings) -> None:
    fmt = table_format(fresh_settings)
    declared = StructType([StructField("n", IntegerType())])
    fmt.ensure_table(spark, OutputTable("silver.narrow", declared))

    grown = StructType([*declared.fields, StructField("note", StringType())])
    fmt.ensure_table(spark, OutputTable("silver.narrow", grown))
    assert spark.table(fmt.qualified("silver.narrow")).columns == ["n", "note"]
    fmt.ensure_table(None, OutputTable("silver.narrow", grown))  # type: ignore[arg-type]  # stands as declared now

    changed = StructType([StructField("n", StringType()), StructField("note", StringType())])
    with pytest.raises(
        ConfigError, match=r"table 'silver.narrow' exists with a different schema.*changed types \['n'\]"
    ):
        fmt.ensure_table(spark, OutputTable("silver.narrow", changed))
    with pytest.raises(ConfigError, match=r"unexpected columns \['note'\]"):
        fmt.ensure_table(spark, OutputTable("silver.narrow", declared))
    fmt.ensure_table(spark, OutputTable("silver.narrow", declared), allow_added=True)
