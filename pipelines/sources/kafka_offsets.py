"""Every Kafka message a table has committed is in it exactly once: the Kafka side of the reconciliation.

A Kafka-fed bronze table keeps its end offsets with each commit (`pipelines.io.kafka_plan`). Per partition, its
rows must hold each offset once, none at or beyond the committed offset (a row the next run would read again), and
no partition without committed offsets. Offsets between the first and the last row that have no row are named in a
note: retention took them (recorded as `tributary.kafka.lost`), or the topic holds no message there (compacted
records, transaction markers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from infra.settings import Settings
from pipelines.io.formats import table_format
from pipelines.io.kafka_plan import OFFSETS_PROPERTY, decode
from pipelines.sources.base import Accounting
from pipelines.spec.sources import KafkaSource
from pipelines.spec.tables import MAIN_FLOW, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession


def of_topics(source: KafkaSource) -> Column:
    """Whether a row came from one of `source`'s topics (named, or matching its pattern as a whole)."""
    if source.pattern is not None:
        return F.col("_kafka_topic").rlike(f"^(?:{source.pattern})$")
    return F.col("_kafka_topic").isin(*source.topics)


def flow_key(key: str, flow: str) -> str:
    """A snapshot property (or writer name) of one flow into a table: the main flow keeps the plain key, so a table
    written before it had other flows reads on as it was."""
    return key if flow == MAIN_FLOW else f"{key}.{flow}"


def offsets_vs_bronze(
    spark: SparkSession, settings: Settings, bronze_spec: TableSpec, source: KafkaSource, flow: str = MAIN_FLOW
) -> Accounting:
    """Rows of `source`'s topics per partition against the offsets the table's flow `flow` committed."""
    fmt = table_format(settings)
    key = flow_key(OFFSETS_PROPERTY, flow)
    kept = fmt.latest_properties(spark, bronze_spec.name, key)
    committed = decode(kept[key]) if kept else {}
    rows = fmt.read(spark, bronze_spec.name)
    if len(bronze_spec.all_flows()) > 1:  # the table's other flows' rows: other topics, or landed files
        rows = rows.filter(of_topics(source))
    per_partition = (
        rows.groupBy("_kafka_topic", "_kafka_partition")
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.count_distinct("_kafka_offset").alias("offsets"),
            F.min("_kafka_offset").alias("first"),
            F.max("_kafka_offset").alias("last"),
        )
        .collect()
    )
    problems, notes, total = [], [], 0
    for r in sorted(per_partition, key=lambda r: (r[0] or "", r[1] or 0)):
        where = f"topic {r[0]} partition {r[1]}"
        total += r["rows"]
        end = committed.get((r[0], r[1]))
        if r["rows"] != r["offsets"]:
            problems.append(f"{where}: {r['rows'] - r['offsets']} offsets are in the table more than once")
        if end is None:
            problems.append(f"{where}: {r['rows']} rows but no committed offset")
        elif r["last"] >= end:
            problems.append(f"{where}: rows up to offset {r['last']}, committed only up to {end - 1}")
        missing = r["last"] - r["first"] + 1 - r["offsets"]
        if missing > 0:
            notes.append(f"{where}: {missing} offsets between {r['first']} and {r['last']} have no row")
    return Accounting(
        name=f"Kafka offsets committed = {bronze_spec.name} rows, each once",
        success=not problems,
        observed=f"{total} rows from {len(per_partition)} partitions, {len(committed)} with committed offsets",
        element_count=total,
        unexpected_count=len(problems),
        samples=problems,
        notes=notes,
    )
