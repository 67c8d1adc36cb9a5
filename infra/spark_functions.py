"""Tributary's own SQL functions (Java classes in `infra/jvm`), registered in the sessions that use them."""

from __future__ import annotations

import weakref
from datetime import UTC, datetime, timedelta
from functools import reduce

from py4j.java_gateway import JavaObject
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, IntegerType, StringType

from infra.jars import (
    BATCH_CONSTANT,
    CSV_DECIMAL,
    CSV_RESCUED,
    EXACT_DECIMAL,
    JSON_LINE_SHAPE,
    JSON_RESCUED,
    LANDED_FILE_PATH,
)

# Registered in every session `infra.spark` builds (and so in the sessions streaming queries clone from it).
JSON_LINE_SHAPE_FUNCTION = "tributary_json_line_shape"
JSON_RESCUED_FUNCTION = "tributary_json_rescued"
CSV_RESCUED_FUNCTION = "tributary_csv_rescued"
LANDED_FILE_PATH_FUNCTION = "tributary_landed_file_path"


def register_functions(session: SparkSession) -> None:
    """Register the functions every session has."""
    session.udf.registerJavaFunction(JSON_LINE_SHAPE_FUNCTION, JSON_LINE_SHAPE, IntegerType())
    session.udf.registerJavaFunction(JSON_RESCUED_FUNCTION, JSON_RESCUED, StringType())
    session.udf.registerJavaFunction(CSV_RESCUED_FUNCTION, CSV_RESCUED, StringType())
    session.udf.registerJavaFunction(LANDED_FILE_PATH_FUNCTION, LANDED_FILE_PATH, StringType())


# The functions registered in each session. Not `catalog.functionExists`: Spark 4.1 looks the name up in the
# current catalog, which fails where that is the read-only Delta folder catalog (a Delta home).
_REGISTERED: weakref.WeakKeyDictionary[SparkSession, set[str]] = weakref.WeakKeyDictionary()


def _register_once(session: SparkSession, name: str, java_class: str, result: DecimalType) -> None:
    registered = _REGISTERED.setdefault(session, set())
    if name not in registered:
        session.udf.registerJavaFunction(name, java_class, result)
        registered.add(name)


def exact_decimal_function(session: SparkSession, decimal: DecimalType) -> str:
    """The SQL name of `ExactDecimal` for `decimal` (its result type) in `session`, registered there on first use:
    (wide value, scale) -> the value at `decimal`, NULL when that would drop a nonzero digit."""
    name = f"tributary_exact_decimal_{decimal.precision}_{decimal.scale}"
    _register_once(session, name, EXACT_DECIMAL, decimal)
    return name


def csv_decimal_function(session: SparkSession, decimal: DecimalType) -> str:
    """The SQL name of `CsvDecimal` for `decimal` (its result type) in `session`, registered there on first use:
    (CSV cell text, precision, scale) -> the value as Spark's CSV parser reads it, NULL unless that is exact."""
    name = f"tributary_csv_decimal_{decimal.precision}_{decimal.scale}"
    _register_once(session, name, CSV_DECIMAL, decimal)
    return name


def landed_file_path(column: Column) -> Column:
    """The path of the file each row is read from, as `_metadata.file_path` gives it, without the row copy that
    `_metadata` costs a CSV or JSON scan (`tributary.landing.LandedFilePath`). Only in a projection directly over
    a file scan; `column` is any non-constant column of the scan (its value is ignored)."""
    return F.call_function(LANDED_FILE_PATH_FUNCTION, column)


def batch_time(session: SparkSession, at: datetime, anchor: Column) -> Column:
    """`at` (timezone-aware) as a TIMESTAMP for every row, with no literal in the generated code, so that every
    batch runs the same compiled code (`tributary.landing.BatchConstant`); `anchor` is any non-constant column of
    the rows (its value is ignored)."""
    micros = (at - _EPOCH) // timedelta(microseconds=1)
    return _batch_constant(_constants(session).ofMicros(micros), anchor, "batch_time")


def with_batch_number(df: DataFrame, column: str, value: int) -> DataFrame:
    """`df` with `column` set to `value` (a BIGINT, such as the batch's id) on every row, with no literal in the
    generated code (see `batch_time`)."""
    anchor = df[df.columns[0]].isNull()
    function = _constants(df.sparkSession).ofLong(value)
    return df.withColumn(column, _batch_constant(function, anchor, "batch_number"))


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _constants(session: SparkSession) -> JavaObject:
    return reduce(getattr, BATCH_CONSTANT.split("."), session._jvm)  # type: ignore[no-any-return]


def _batch_constant(function: JavaObject, anchor: Column, name: str) -> Column:
    return Column(function.column(anchor._jc, f"tributary_{name}"))
