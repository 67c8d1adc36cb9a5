"""A Delta table kept outside the registry, read by its change feed (`tb.delta_changes`): the bronze table holds
every change exactly once, and a silver table applying them (`tb.cdc`) equals the external table after inserts,
updates and deletes. A run with nothing new writes nothing; a table without a change feed, or a path without a
table, is refused in one line naming it and the fix."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from infra.errors import ConfigError, PipelineError
from pipelines.authoring.load import load_registry
from pipelines.run.pipeline import run_pipeline
from pipelines.run.runner import run_table
from tests.support.helpers import compiled_classes, table
from tests.support.homes import make_settings
from tests.support.packages import write_package

TABLES = """
import pipelines.authoring as tb
from pyspark.sql import functions as F

tb.landing("bronze.crm_changes", tb.delta_changes({path!r}))

OPS = "CASE _change_type WHEN 'insert' THEN 'I' WHEN 'update_postimage' THEN 'U' ELSE 'D' END"


@tb.silver(write=tb.cdc("id", sequence="seq", values=("name", "tier"), op="op", time="_commit_timestamp"))
def crm_customers(bronze_crm_changes):
    changes = bronze_crm_changes.filter("_change_type != 'update_preimage'")
    return changes.withColumn("op", F.expr(OPS)).withColumn("seq", F.col("_commit_version"))
"""


def _external(path: str, feed: bool = True) -> None:
    """Another system's table, written with delta-rs."""
    rows = pa.table(
        {"id": pa.array([1, 2, 3], pa.int64()), "name": ["ada", "bo", "cy"], "tier": ["gold", "silver", "bronze"]}
    )
    write_deltalake(path, rows, configuration={"delta.enableChangeDataFeed": "true"} if feed else None)


def _rows(spark: SparkSession, settings, name: str, *columns: str) -> list[tuple]:
    return sorted(tuple(r) for r in table(spark, settings, name).select(*columns).collect())


def test_changes_land_once_and_apply_to_the_same_rows(spark, tmp_path):
    path = str(tmp_path / "crm" / "customers")
    _external(path)
    settings = make_settings(tmp_path / "home")
    package = write_package(tmp_path / "packages", "crm_feed", {"tables.py": TABLES.format(path=path)})
    registry = load_registry([package])

    run_pipeline(spark, settings, registry)
    assert _rows(spark, settings, "bronze.crm_changes", "id", "_change_type") == [
        (1, "insert"),
        (2, "insert"),
        (3, "insert"),
    ]
    DeltaTable(path).update(updates={"tier": "'platinum'"}, predicate="id = 1")
    DeltaTable(path).delete("id = 2")
    write_deltalake(
        path, pa.table({"id": pa.array([4], pa.int64()), "name": ["di"], "tier": ["silver"]}), mode="append"
    )
    started = time.time_ns() // 1000
    reports = {r.table: r for r in run_pipeline(spark, settings, registry)}
    ended = time.time_ns() // 1000
    assert reports["bronze.crm_changes"].rows_in == 4 and reports["bronze.crm_changes"].rows_written() == 4

    feed = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0).load(path)
    columns = ("id", "name", "tier", "_change_type", "_commit_version")
    assert _rows(spark, settings, "bronze.crm_changes", *columns) == sorted(
        tuple(r) for r in feed.select(*columns).collect()
    )
    # The changes one batch read carry one read time, taken while that run ran.
    (stamps,) = (
        table(spark, settings, "bronze.crm_changes")
        .filter("_commit_version > 0")
        .selectExpr("collect_set(unix_micros(_ingested_at))")
        .first()
    )
    assert len(stamps) == 1 and started <= stamps[0] <= ended, (started, stamps, ended)
    external = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
    assert _rows(spark, settings, "silver.crm_customers", "id", "name", "tier") == external
    assert (1, "ada", "platinum") in external and not any(r[0] == 2 for r in external)

    again = {r.table: r for r in run_pipeline(spark, settings, registry)}
    assert again["bronze.crm_changes"].skipped and again["bronze.crm_changes"].rows_in == 0
    assert all(r.skipped for r in again.values())
    snapshots = {name: stats.snapshot_id for r in reports.values() for name, stats in r.tables.items()}
    assert {name: stats.snapshot_id for r in again.values() for name, stats in r.tables.items()} == snapshots

    # A later batch of the same shape runs the code the last one compiled: no batch's value is written into it
    # (stamping the read time with current_timestamp() compiled 4 classes for that batch, the batch constant 2).
    bronze = registry.get("bronze.crm_changes")
    for tier in ("gold", "silver"):
        DeltaTable(path).update(updates={"tier": f"'{tier}'"}, predicate="id = 3")
        before = compiled_classes(spark)
        assert run_table(spark, settings, bronze).rows_in == 2
    compiled = compiled_classes(spark) - before
    assert compiled <= 2, f"a second change batch of the same shape compiled {compiled} classes"


def test_a_table_without_a_change_feed_is_refused_naming_the_fix(spark, tmp_path):
    path = str(tmp_path / "crm" / "plain")
    _external(path, feed=False)
    settings = make_settings(tmp_path / "home")
    package = write_package(tmp_path / "packages", "crm_plain", {"tables.py": TABLES.format(path=path)})
    registry = load_registry([package])
    with pytest.raises(PipelineError) as refused:
        run_pipeline(spark, settings, registry, ["bronze.crm_changes"])
    assert str(refused.value) == (
        f"table bronze.crm_changes: the Delta table at {path} does not record its changes; run ALTER TABLE "
        f"delta.`{path}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true) (changes before that cannot be read)"
    )
    assert not settings.checkpoint_for("bronze.crm_changes").exists()


def test_a_path_without_a_delta_table_is_named_when_the_dataset_loads(tmp_path):
    path = str(tmp_path / "nowhere")
    package = write_package(tmp_path / "packages", "crm_missing", {"tables.py": TABLES.format(path=path)})
    with pytest.raises(ConfigError) as refused:
        load_registry([package])
    message = str(refused.value)
    assert message.startswith(f"{tmp_path / 'packages' / 'crm_missing' / 'tables.py'}:4: "), message
    assert f"delta_changes({path!r}) names no Delta table (no _delta_log there); check the path" in message
