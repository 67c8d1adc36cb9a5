"""The small increment as plain PySpark: the batch code a data engineer would write by hand for the events chain.

The bench's small increment lands one file of new events; Tributary runs every demo table on it. The plain side
does the same steps on copies of the events chain's tables (made before the increment, not timed), with the
dataset's own functions and rules, in the same warm session:

- bronze: Spark's JSON reader on the new files, lineage columns, one append;
- silver: the rows that pass the rules, one per `event_id`, without the ids silver already holds, one append;
- gold `daily_revenue`: the days from the first to the last touched one recomputed from silver, one MERGE;
- gold `event_counts_5m`: the new rows counted per 5-minute window, one MERGE adding to the stored counts.

It keeps fewer promises (no quarantine table, no per-file health, no checkpoint, no lock): the simplest code that
gives the same tables, which is what the issue compares with.
"""

from __future__ import annotations

import time

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from infra.settings import Settings
from pipelines.datasets.ecommerce.tables import LANDED_SCHEMA, daily_revenue, event_counts_5m, events
from pipelines.io.formats import table_format
from pipelines.io.iceberg_options import DEFAULT_TABLE_PROPERTIES
from pipelines.io.landing_parse import CORRUPT_COLUMN, REJECTED_COLUMN, with_corrupt
from pipelines.spec.registry import Registry

NAMESPACE = "baseline_increment"
CHAIN = ("bronze.events", "silver.events", "gold.daily_revenue", "gold.event_counts_5m")


def plain_table(settings: Settings, table: str) -> str:
    """The plain side's copy of `table`."""
    return table_format(settings).qualified(f"{NAMESPACE}.{table.replace('.', '_')}")


def _partitioning(spark: SparkSession, qualified: str) -> list[str]:
    """The table's partition transforms as Iceberg's DESCRIBE prints them (`days(event_time)`)."""
    return [r.data_type for r in spark.sql(f"DESCRIBE TABLE {qualified}").collect() if r.col_name.startswith("Part ")]


def copy_chain(spark: SparkSession, settings: Settings) -> None:
    """Copy the events chain's tables as they stand (partitioning and table properties kept) for the plain side.

    Bronze keeps only the columns Spark's JSON reader and the plain lineage give; the other tables keep theirs.
    """
    fmt = table_format(settings)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {settings.catalog_name}.{NAMESPACE}")
    bronze_columns = [*LANDED_SCHEMA.names, CORRUPT_COLUMN, "_source_file", "_ingested_at"]
    properties = ", ".join(f"'{k}' = '{v}'" for k, v in DEFAULT_TABLE_PROPERTIES.items())
    for table in CHAIN:
        source = fmt.qualified(table)
        columns = bronze_columns if table == "bronze.events" else spark.table(source).columns
        parts = _partitioning(spark, source)
        spark.sql(
            f"CREATE OR REPLACE TABLE {plain_table(settings, table)} USING iceberg "
            + (f"PARTITIONED BY ({', '.join(parts)}) " if parts else "")
            + f"TBLPROPERTIES ({properties}) AS SELECT {', '.join(f'`{c}`' for c in columns)} FROM {source}"
        )


def plain_increment(spark: SparkSession, settings: Settings, registry: Registry, files: list[str]) -> dict[str, float]:
    """Seconds of each plain step on the new landed `files` (after `copy_chain`), and in all."""
    silver = registry.get("silver.events")
    out: dict[str, float] = {}
    started = t = time.perf_counter()
    raw = (
        spark.read.schema(with_corrupt(LANDED_SCHEMA))
        .options(mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT_COLUMN)
        .json(files)
        .withColumn("_source_file", F.col("_metadata.file_path"))
        .withColumn("_ingested_at", F.current_timestamp())
        .persist()
    )
    raw.writeTo(plain_table(settings, "bronze.events")).append()
    out["bronze_seconds"] = _since(t)

    t = time.perf_counter()
    # The dataset's own rules (a landed file is never rejected here) after its own function.
    passes = " AND ".join(f"({rule.expr})" for rule in silver.sink.rules if rule.action != "warn") or "true"
    transformed = events(raw.withColumn(REJECTED_COLUMN, F.lit(None).cast("string")))
    target = plain_table(settings, "silver.events")
    stored = spark.table(target).select("event_id")
    # Materialized before the append: a cached frame that reads the target is recomputed once the target changes.
    fresh = (
        _shaped(transformed.filter(passes).dropDuplicates(["event_id"]), spark.table(target))
        .join(stored, "event_id", "left_anti")
        .localCheckpoint()
    )
    fresh.writeTo(target).append()
    out["silver_seconds"] = _since(t)

    t = time.perf_counter()
    first, last = fresh.agg(F.min("event_date"), F.max("event_date")).first()
    touched = spark.table(plain_table(settings, "silver.events")).filter(F.col("event_date").between(first, last))
    _merge(
        daily_revenue(touched),
        plain_table(settings, "gold.daily_revenue"),
        "t.event_date = s.event_date AND t.category <=> s.category AND t.currency <=> s.currency",
        None,
    )
    out["daily_revenue_seconds"] = _since(t)

    t = time.perf_counter()
    _merge(
        event_counts_5m(fresh),
        plain_table(settings, "gold.event_counts_5m"),
        "t.window_start = s.window_start AND t.event_type = s.event_type",
        {"events": "t.events + s.events"},
    )
    out["event_counts_5m_seconds"] = _since(t)
    out["seconds"] = _since(started)
    raw.unpersist()
    return out


def _merge(rows: DataFrame, target: str, on: str, update: dict[str, str] | None) -> None:
    """MERGE `rows` into `target`: `update` (every column when None) for a stored row, an insert for a new one.

    By Spark 4's DataFrame merge, as a user writes it on Spark 4.1, where a SQL MERGE from a temp view over a table
    fails to plan (SPARK-57539); the target's columns are qualified by its name."""
    spark = rows.sparkSession

    def named(sql: str) -> Column:
        return F.expr(sql.replace("t.", f"{target}."))

    matched = _shaped(rows, spark.table(target)).alias("s").mergeInto(target, named(on)).whenMatched()
    writer = matched.updateAll() if update is None else matched.update({c: named(v) for c, v in update.items()})
    writer.whenNotMatched().insertAll().merge()


def _shaped(df: DataFrame, like: DataFrame) -> DataFrame:
    """`df` with `like`'s columns in its order (a column `df` lacks is NULL of its type)."""
    have = set(df.columns)
    return df.select(
        *[F.col(f.name) if f.name in have else F.lit(None).cast(f.dataType).alias(f.name) for f in like.schema.fields]
    )


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 3)
