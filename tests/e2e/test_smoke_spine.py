"""Quick check that fixtures give isolated catalogs on one SparkSession."""

from infra.settings import Settings
from pipelines.datasets import default_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.run.pipeline import run_pipeline


def test_two_homes_are_isolated(spark, settings_factory):
    a: Settings = settings_factory()
    b: Settings = settings_factory()
    generate(a.landing, rows=300, files=2, seed=1)
    generate(b.landing, rows=500, files=2, seed=2)
    ra = run_pipeline(spark, a, default_registry(), ["bronze.events"])
    rb = run_pipeline(spark, b, default_registry(), ["bronze.events"])
    assert ra[0].tables["bronze.events"].rows == 300
    assert rb[0].tables["bronze.events"].rows == 500
