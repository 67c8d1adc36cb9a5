"""Table schemas inferred from what each function returns, planned by Spark on empty inputs (no query runs).

A file source's function receives the landed rows (the declared landing schema plus the platform's lineage
columns); a table function receives empty streams of its upstream tables (watermarked as declared) and the
reference tables read whole. The kind then shapes the result into the table's schema, and a declared schema
is checked against it as a contract.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from infra.errors import ConfigError, first_line
from pipelines.io.landing_parse import LANDED_LINEAGE

if TYPE_CHECKING:
    from pipelines.authoring.declarations import Declaration
    from pipelines.spec.tables import TableSpec

_EMPTY: list[str] = []


def session() -> SparkSession:
    """The active SparkSession, or the process's session for the environment's settings."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    from infra.settings import Settings
    from infra.spark import get_spark

    return get_spark(Settings.from_env())


def _empty_folder() -> str:
    if not _EMPTY:
        _EMPTY.append(tempfile.mkdtemp(prefix="tributary-infer-"))
        atexit.register(shutil.rmtree, _EMPTY[0], True)
    return _EMPTY[0]


def empty_stream(spark: SparkSession, schema: StructType) -> DataFrame:
    """A streaming DataFrame of `schema` that is never started: enough for Spark to plan what reads it."""
    return spark.readStream.schema(schema).format("parquet").load(_empty_folder())


def landed_schema(d: Declaration) -> StructType:
    """What a file source's function receives: the declared landing fields, then the lineage columns."""
    assert d.source is not None
    return StructType([*d.source.schema.fields, *LANDED_LINEAGE])


def input_frames(d: Declaration, specs: Mapping[str, TableSpec], streaming: bool = True) -> list[DataFrame]:
    """Empty inputs of `d`'s function in parameter order (streams as streams unless `streaming` is False)."""
    spark = session()
    if d.source is not None:
        return [spark.createDataFrame([], landed_schema(d))]
    frames = []
    for param in d.params:
        schema = specs[param.table].output.schema
        if param.static or not streaming:
            frames.append(spark.createDataFrame([], schema))
            continue
        df = empty_stream(spark, schema)
        if d.watermark is not None:
            if d.watermark.column not in schema.names:
                raise d.error(
                    f"the watermark column {d.watermark.column!r} is not a column of {param.table}",
                    f"watermark on one of {', '.join(schema.names)}",
                )
            df = df.withWatermark(d.watermark.column, d.watermark.delay)
        frames.append(df)
    return frames


def check_contract(d: Declaration, inferred: StructType) -> StructType:
    """`inferred`, when it equals the declared schema (names, order and types); else an error naming both."""
    if d.schema is None:
        return inferred
    want = [(f.name, f.dataType.simpleString()) for f in d.schema.fields]
    have = [(f.name, f.dataType.simpleString()) for f in inferred.fields]
    if want != have:
        extra = [f"{n} {t}" for n, t in have if (n, t) not in want]
        missing = [f"{n} {t}" for n, t in want if (n, t) not in have]
        raise d.error(
            f"the declared schema does not match what the function returns (missing: {', '.join(missing) or '-'}; "
            f"not declared: {', '.join(extra) or '-'})",
            "change the function or the declared schema, or leave schema= out to infer it",
        )
    return d.schema


def inferrer(
    d: Declaration, specs: Mapping[str, TableSpec], plan: Callable[[list[DataFrame]], DataFrame], shape: Callable
) -> Callable[[], StructType]:
    """The zero-argument schema function of `d`'s table: plan on empty inputs, shape, check the contract."""

    def infer() -> StructType:
        frames = input_frames(d, specs, streaming=not d.write.recomputes)
        try:
            planned = plan(frames).schema
        except ConfigError:
            raise
        except Exception as exc:  # the function or Spark's analysis failed: one line naming the declaration
            raise d.error(f"the function cannot be planned: {first_line(exc)}", "fix the function") from None
        return check_contract(d, shape(d, planned))

    return infer
