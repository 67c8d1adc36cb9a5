"""Tributary's own SQL functions (Java classes in `infra/jvm`), registered in the sessions that use them."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql.types import DecimalType, IntegerType, StringType

from infra.jars import CSV_DECIMAL, CSV_RESCUED, EXACT_DECIMAL, JSON_LINE_SHAPE, JSON_RESCUED

# Registered in every session `infra.spark` builds (and so in the sessions streaming queries clone from it).
JSON_LINE_SHAPE_FUNCTION = "tributary_json_line_shape"
JSON_RESCUED_FUNCTION = "tributary_json_rescued"
CSV_RESCUED_FUNCTION = "tributary_csv_rescued"


def register_functions(session: SparkSession) -> None:
    """Register the functions every session has."""
    session.udf.registerJavaFunction(JSON_LINE_SHAPE_FUNCTION, JSON_LINE_SHAPE, IntegerType())
    session.udf.registerJavaFunction(JSON_RESCUED_FUNCTION, JSON_RESCUED, StringType())
    session.udf.registerJavaFunction(CSV_RESCUED_FUNCTION, CSV_RESCUED, StringType())


def exact_decimal_function(session: SparkSession, decimal: DecimalType) -> str:
    """The SQL name of `ExactDecimal` for `decimal` (its result type) in `session`, registered there on first use:
    (wide value, scale) -> the value at `decimal`, NULL when that would drop a nonzero digit."""
    name = f"tributary_exact_decimal_{decimal.precision}_{decimal.scale}"
    if not session.catalog.functionExists(name):
        session.udf.registerJavaFunction(name, EXACT_DECIMAL, decimal)
    return name


def csv_decimal_function(session: SparkSession, decimal: DecimalType) -> str:
    """The SQL name of `CsvDecimal` for `decimal` (its result type) in `session`, registered there on first use:
    (CSV cell text, precision, scale) -> the value as Spark's CSV parser reads it, NULL unless that is exact."""
    name = f"tributary_csv_decimal_{decimal.precision}_{decimal.scale}"
    if not session.catalog.functionExists(name):
        session.udf.registerJavaFunction(name, CSV_DECIMAL, decimal)
    return name
