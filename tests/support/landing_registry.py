"""A small user dataset for the landing tests: orders landed as CSV or JSON, bronze → silver with quarantine."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pipelines.io.landing_parse import LANDED_LINEAGE
from pipelines.spec.registry import Registry
from pipelines.spec.rules import Rule, apply_rules
from pipelines.spec.sources import FileSource, SchemaEvolution, TableSource
from pipelines.spec.tables import OutputTable, TableSpec
from pipelines.write.sinks import AppendSink
from pipelines.write.validate import ValidateDedupeSink

ORDER_FIELDS = [
    StructField("order_id", StringType()),
    StructField("quantity", IntegerType()),
    StructField("price", DecimalType(10, 2)),
    StructField("ordered_at", TimestampType()),
    StructField("customer", StringType()),
]
ORDER_COLUMNS = tuple(f.name for f in ORDER_FIELDS)
RULES = (
    Rule("well_formed", "_corrupt_record IS NULL", "quarantine", "not a record of the declared schema"),
    Rule("file_rejected", "_file_rejected IS NULL", "quarantine", "its landed file was rejected"),
    Rule("order_id_present", "order_id IS NOT NULL", "quarantine", "order_id is missing"),
    Rule("no_rescued_data", "_rescued_data IS NULL", "warn", "fields the schema does not declare"),
)
QUARANTINE_FIELDS = [
    StructField("order_id", StringType()),
    StructField("reasons", ArrayType(StringType())),
    StructField("raw_record", StringType()),
    StructField("_source_file", StringType()),
    StructField("_ingested_at", TimestampType()),
    StructField("_batch_id", LongType()),
]


def silver_transform(df: DataFrame) -> DataFrame:
    """Keep the record as landed, derive the order date, evaluate the rules."""
    business = F.to_json(F.struct(*[F.col(c) for c in ORDER_COLUMNS]))
    typed = df.withColumn("raw_record", F.coalesce(F.col("_corrupt_record"), business))
    return apply_rules(typed.withColumn("order_date", F.to_date("ordered_at")), RULES)


def orders_registry(
    dataset: str, fmt: str, evolution: SchemaEvolution = "rescue", reject_ratio: float = 0.5, archive: bool = False
) -> Registry:
    """bronze.<dataset> (files, as landed) → silver.<dataset> (valid, unique by order_id) + quarantine."""
    bronze = OutputTable(
        f"bronze.{dataset}", StructType([*ORDER_FIELDS, *LANDED_LINEAGE, StructField("_batch_id", LongType())])
    )
    silver = OutputTable(
        f"silver.{dataset}",
        StructType(
            [
                *ORDER_FIELDS,
                StructField("order_date", DateType()),
                StructField("_source_file", StringType()),
                StructField("_batch_id", LongType()),
            ]
        ),
    )
    quarantine = OutputTable(f"silver.{dataset}_quarantine", StructType(QUARANTINE_FIELDS))
    source = FileSource(
        dataset,
        fmt,  # type: ignore[arg-type]
        StructType(ORDER_FIELDS),
        schema_evolution=evolution,
        reject_file_ratio=reject_ratio,
        archive=archive,
    )
    return Registry(
        [
            TableSpec(
                output=bronze,
                layer="bronze",
                description="orders as landed",
                source=source,
                transform=lambda df: df,
                sink=AppendSink(batch_id_column="_batch_id"),
            ),
            TableSpec(
                output=silver,
                layer="silver",
                description="valid unique orders",
                source=TableSource(bronze.name),
                transform=silver_transform,
                sink=ValidateDedupeSink(
                    quarantine_table=quarantine.name,
                    keys=("order_id",),
                    time_column="ordered_at",
                    columns=tuple(silver.schema.names),
                    quarantine_columns=tuple(quarantine.schema.names),
                    rules=RULES,
                ),
                keys=("order_id",),
                extra_outputs=(quarantine,),
            ),
        ]
    )
