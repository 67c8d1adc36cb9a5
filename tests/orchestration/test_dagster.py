"""The Dagster definitions load, validate, and materialize the whole pipeline with truthful metadata."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import AssetKey, AssetsDefinition, DagsterInstance, asset, materialize
from dagster_pyspark import LazyPySparkResource

from infra.errors import ConfigError
from orchestration.definitions import PIPELINE_JOB, build_definitions
from orchestration.resources import SparkResource
from pipelines.datasets.clickstream.sample_data import generate_clickstream
from pipelines.datasets.ecommerce.sample_data import generate
from tests.support.helpers import ALL_TABLES, table
from tests.support.repo import REPO


def test_definitions_validate(tmp_path):
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "TRIBUTARY_HOME": str(tmp_path / "home")}
    result = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_assets_follow_the_registry():
    defs = build_definitions()
    graph = defs.resolve_asset_graph()
    keys = {tuple(k.path) for k in graph.get_all_asset_keys()}
    assert {tuple(t.split(".")) for t in ALL_TABLES} <= keys
    silver = graph.get(AssetKey(["silver", "events"]))
    assert silver.parent_keys == {AssetKey(["bronze", "events"])}
    assert silver.group_name == "silver"
    assert {"spark", "iceberg"} <= set(silver.kinds)
    assert graph.get(AssetKey(["gold", "daily_revenue"])).parent_keys == {AssetKey(["silver", "events"])}


def test_a_users_asset_gets_the_runs_session_from_dagster_pysparks_resource(spark, fresh_settings) -> None:
    s = fresh_settings
    seen = {}

    @asset
    def users_own(pyspark: LazyPySparkResource) -> None:
        # Written against dagster-pyspark's resource type: our SparkResource is one.
        seen["session"] = pyspark.spark_session
        seen["rows"] = pyspark.spark_session.range(3).count()
        seen["context"] = pyspark.spark_context

    resource = SparkResource(home=str(s.home), catalog_name=s.catalog_name)
    assert materialize([users_own], resources={"pyspark": resource}).success
    assert seen["session"] is spark and seen["rows"] == 3 and seen["context"] is spark.sparkContext
    assert resource.session() is spark


def test_the_resources_spark_config_is_checked_and_named(fresh_settings) -> None:
    s = fresh_settings
    given = SparkResource(home=str(s.home), spark_config={"spark.sql.shuffle.partitions": 7, "spark.x.y": "z"})
    assert dict(given.settings().spark_conf) == {"spark.sql.shuffle.partitions": "7", "spark.x.y": "z"}
    bad = SparkResource(home=str(s.home), spark_config={"spark.driver.memory": "lots"})
    named = r"^the Dagster resource's spark_config key spark\.driver\.memory='lots' is not a JVM memory size"
    with pytest.raises(ConfigError, match=named):
        bad.settings()


@pytest.mark.slow
def test_pipeline_job_materializes_everything_with_metadata(spark, fresh_settings, tmp_path):
    s = fresh_settings
    gen = generate(s.landing, rows=2000, files=3, seed=9)
    generate_clickstream(s.landing, impressions=400, files=2, seed=9)
    defs = build_definitions()
    job = defs.resolve_job_def(PIPELINE_JOB)
    resource = SparkResource(home=str(s.home), catalog_name=s.catalog_name)
    with DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(instance=instance, resources={"spark": resource})
        assert result.success
        mats = {
            ".".join(e.event_specific_data.materialization.asset_key.path): {
                k: v.value for k, v in e.event_specific_data.materialization.metadata.items()
            }
            for e in result.get_asset_materialization_events()
        }
        assert set(mats) == set(ALL_TABLES)
        for name in ALL_TABLES:
            assert mats[name]["table_rows"] == table(spark, s, name).count()
        bronze, silver = mats["bronze.events"], mats["silver.events"]
        assert bronze["rows_in"] == bronze["rows_written"] == gen.lines
        assert silver["rows_in"] == gen.lines
        quarantined = mats["silver.events_quarantine"]["rows_written"]
        assert silver["rows_quarantined"] == quarantined > 0
        assert silver["rows_written"] + quarantined + silver["duplicates_dropped"] == gen.lines
        assert silver["duplicates_dropped"] == gen.duplicates
        assert int(bronze["snapshot_id"]) > 0 and bronze["data_files"] >= 1

        # The second materialization finds nothing new: zero rows written, same snapshots.
        again = job.execute_in_process(instance=instance, resources={"spark": resource})
        for e in again.get_asset_materialization_events():
            meta = e.event_specific_data.materialization.metadata
            name = ".".join(e.event_specific_data.materialization.asset_key.path)
            assert meta["rows_written"].value == 0
            assert meta["snapshot_id"].value == mats[name]["snapshot_id"]

        # A table selected alone runs with its companions (written in the same commit), logged as materializations
        # of the same run; nothing upstream or downstream runs.
        tables = [a for a in defs.assets if isinstance(a, AssetsDefinition)]
        alone = materialize(
            tables, selection=[AssetKey(["silver", "events"])], instance=instance, resources={"spark": resource}
        )
        assert alone.success
        written = {".".join(e.asset_key.path) for e in alone.get_asset_materialization_events()}
        assert {"silver.events", "silver.events_quarantine"} <= written
        assert all(name.startswith("silver.events") for name in written), written
