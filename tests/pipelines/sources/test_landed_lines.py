"""Landed lines = bronze rows, file by file: read from the files table bronze's batches record, and counted
from bronze's rows whenever those records do not add up to the table."""

from __future__ import annotations

from pyspark.sql import functions as F

from pipelines.authoring.load import load_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io.formats import table_format
from pipelines.run.pipeline import run_pipeline
from pipelines.spec.registry import Registry
from quality.reconcile import pipelines_of, reconcile_pipeline

ECOMMERCE = load_registry(["pipelines.datasets.ecommerce"])
CHAIN = Registry([ECOMMERCE.get("bronze.events"), ECOMMERCE.get("silver.events")])


def test_a_bronze_row_lost_behind_the_pipeline_is_named_with_its_file(spark, format_settings):
    s, fmt = format_settings, table_format(format_settings)
    report = generate(s.landing, rows=400, files=2, seed=61)
    run_pipeline(spark, s, CHAIN)
    (pipeline,) = pipelines_of(CHAIN)
    landed = reconcile_pipeline(spark, s, pipeline).outcomes[0]
    assert landed.success and landed.observed == f"{report.lines} landed lines, {report.lines} bronze rows in 2 files"

    bronze = fmt.read(spark, "bronze.events")
    victim = bronze.filter("event_id IS NOT NULL").orderBy("_source_file", "event_id").first()
    same = (F.col("_source_file") == victim["_source_file"]) & F.col("event_id").eqNullSafe(victim["event_id"])
    kept = bronze.filter(~same)
    fmt.overwrite(kept.localCheckpoint(), "bronze.events")
    lost = reconcile_pipeline(spark, s, pipeline).outcomes[0]
    name = victim["_source_file"].rsplit("/", 1)[-1]
    assert not lost.success and lost.unexpected_count == 1
    assert [sample.split(":")[0] for sample in lost.samples] == [name] and "in bronze" in lost.samples[0]
