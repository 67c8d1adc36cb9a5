"""Table maintenance: compaction, expiry, orphan removal, stream safety, concurrency, and the Dagster parts."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlparse

import pytest
from dagster import DagsterInstance, Definitions, RunRequest, SkipReason, build_sensor_context
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from infra.errors import ConfigError, PipelineError
from infra.settings import Settings
from orchestration.maintenance import (
    MAINTENANCE_JOB,
    build_compaction_sensor,
    build_maintenance_assets,
    maintenance_job,
    maintenance_key,
    maintenance_schedule,
)
from orchestration.resources import SparkResource
from pipelines.datasets import default_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io.checkpoints import consumer_positions
from pipelines.io.formats import table_format
from pipelines.ops.maintenance import procedures
from pipelines.ops.maintenance.cleanup import expire_snapshots, remove_orphan_files
from pipelines.ops.maintenance.compaction import rewrite_data_files
from pipelines.ops.maintenance.procedures import (
    COMPACTION_OPERATIONS,
    EXPIRE_SNAPSHOTS,
    REMOVE_ORPHAN_FILES,
    REWRITE_DATA_FILES,
)
from pipelines.ops.maintenance.runner import run_maintenance
from pipelines.ops.maintenance.shape import table_location
from pipelines.ops.table_health import compaction_reason, file_health
from pipelines.run.runner import run_table
from pipelines.spec.registry import Registry
from pipelines.spec.sources import FileSource
from pipelines.spec.tables import MaintenancePolicy, TableSpec
from tests.support.object_storage import backing_file, in_bucket, plant_file
from tests.support.reference import classify, load_landing

BRONZE = "bronze.events"
SILVER = "silver.events"


def _bronze(policy: MaintenancePolicy | None = None) -> TableSpec:
    """The demo bronze spec reading one landing file per micro-batch (one small commit per file)."""
    spec = default_registry().get(BRONZE)
    assert isinstance(spec.source, FileSource)
    spec = replace(spec, source=replace(spec.source, max_files_per_trigger=1))
    return replace(spec, maintenance=policy) if policy else spec


def _checksum(spark: SparkSession, settings: Settings, name: str, snapshot_id: int | None = None) -> tuple[int, str]:
    """Row count and a checksum of the sorted rows (every column), optionally at a snapshot."""
    qualified = table_format(settings).qualified(name)
    df = spark.read.option("versionAsOf", snapshot_id).table(qualified) if snapshot_id else spark.table(qualified)
    hashes = sorted(r.h for r in df.select(F.sha2(F.to_json(F.struct(*df.columns)), 256).alias("h")).collect())
    return len(hashes), hashlib.sha256("".join(hashes).encode()).hexdigest()


def _snapshots(spark: SparkSession, settings: Settings, name: str) -> list[tuple[int, str]]:
    """(snapshot id, operation), oldest first."""
    qualified = table_format(settings).qualified(name)
    rows = spark.sql(f"SELECT snapshot_id, operation FROM {qualified}.snapshots ORDER BY committed_at").collect()
    return [(r.snapshot_id, r.operation) for r in rows]


def _disk_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _landed_lines_per_file(settings: Settings) -> Counter[str]:
    return Counter(name for name, _ in load_landing(settings.landing))


def test_policy_validation_and_delta_mapping():
    with pytest.raises(ConfigError, match=r"'bronze.events'.*orphan_retention_days=0.*24 hours"):
        Registry([_bronze(MaintenancePolicy(orphan_retention_days=0))])
    with pytest.raises(ConfigError, match=r"'bronze.events'.*min_snapshots_to_keep=0"):
        Registry([_bronze(MaintenancePolicy(min_snapshots_to_keep=0))])
    with pytest.raises(ConfigError, match=r"'bronze.events'.*sort_order item 'event_time; DROP TABLE x'"):
        Registry([_bronze(MaintenancePolicy(sort_order=("event_time; DROP TABLE x",)))])
    defaults = MaintenancePolicy()
    assert (defaults.snapshot_retention_days, defaults.min_snapshots_to_keep, defaults.orphan_retention_days) == (
        7,
        5,
        3,
    )


def test_compaction_cuts_small_files_tenfold_with_identical_rows(spark, fresh_settings):
    s = fresh_settings
    landed = generate(s.landing, rows=1500, files=30, seed=3)
    registry = Registry([_bronze()])
    run = run_table(spark, s, registry.get(BRONZE))
    assert run.data_batches == 30
    rows_before = _checksum(spark, s, BRONZE)
    assert rows_before[0] == landed.lines

    policy = registry.get(BRONZE).maintenance
    health = file_health(s, BRONZE, policy)
    assert health is not None and health.data_files >= 30 and health.compactable_files >= 30
    assert compaction_reason(health, policy) is not None

    report = run_maintenance(spark, s, registry, BRONZE, COMPACTION_OPERATIONS)
    assert report.before is not None and report.after is not None
    assert report.before.data_files >= 30
    assert report.after.data_files * 10 <= report.before.data_files
    assert report.after.rows == report.before.rows == landed.lines
    assert report.after.avg_file_bytes > report.before.avg_file_bytes
    assert report.steps[REWRITE_DATA_FILES]["rewritten_data_files_count"] >= 30
    assert _checksum(spark, s, BRONZE) == rows_before

    after = file_health(s, BRONZE, policy)
    assert after is not None and after.data_files == report.after.data_files
    assert compaction_reason(after, policy) is None

    # Ingestion carries on after compaction: only the new file's rows are appended.
    more = generate(s.landing, rows=40, files=1, seed=4)
    rerun = run_table(spark, s, registry.get(BRONZE))
    assert rerun.rows_written() == more.lines
    assert _checksum(spark, s, BRONZE)[0] == landed.lines + more.lines


@pytest.mark.parametrize("storage", ["local", "s3"])
def test_expiry_and_orphan_removal_free_disk_and_keep_time_travel(spark, fresh_settings, request, storage):
    # On the S3 test server the files are checked, aged and planted in the folder that holds its objects.
    server = request.getfixturevalue("s3_server") if storage == "s3" else None
    s = in_bucket(fresh_settings, server) if server else fresh_settings
    generate(s.landing, rows=300, files=6, seed=5)
    registry = Registry([_bronze()])  # no downstream consumer: nothing holds snapshots back
    spec = registry.get(BRONZE)
    run_table(spark, s, spec)
    qualified = table_format(s).qualified(BRONZE)
    files = spark.sql(f"SELECT file_path FROM {qualified}.files").collect()
    originals = {backing_file(r.file_path, server) for r in files}
    assert len(originals) >= 6 and all(p.exists() for p in originals)
    run_maintenance(spark, s, registry, BRONZE, COMPACTION_OPERATIONS)
    generate(s.landing, rows=100, files=2, seed=6)
    run_table(spark, s, spec)
    history = _snapshots(spark, s, BRONZE)
    kept = [sid for sid, _ in history[-2:]]
    expired = [sid for sid, _ in history[:-2]]
    kept_rows = _checksum(spark, s, BRONZE, snapshot_id=kept[0])
    current_rows = _checksum(spark, s, BRONZE)

    folder = backing_file(table_location(spark, s, BRONZE), server)
    if server:
        assert folder.is_relative_to(server.data_dir), folder
    old_orphan = folder / "data" / "orphan-from-a-crashed-writer.parquet"
    plant_file(old_orphan, b"x" * 50_000, server)
    four_days_ago = time.time() - 4 * 86400
    os.utime(old_orphan, (four_days_ago, four_days_ago))
    young_orphan = folder / "data" / "maybe-an-inflight-commit.parquet"
    plant_file(young_orphan, b"y" * 50_000, server)
    two_days_ago = time.time() - 2 * 86400
    os.utime(young_orphan, (two_days_ago, two_days_ago))
    freed_at_least = sum(p.stat().st_size for p in originals) + old_orphan.stat().st_size
    disk_before = _disk_bytes(folder)

    with pytest.raises(ConfigError, match=r"'bronze.events'.*older than 24 hours"):
        remove_orphan_files(spark, s, BRONZE, spec.maintenance, older_than=datetime.now(UTC) - timedelta(hours=23))

    report = run_maintenance(
        spark,
        s,
        registry,
        BRONZE,
        (EXPIRE_SNAPSHOTS, REMOVE_ORPHAN_FILES),
        expire_older_than=datetime.now(UTC),
        retain_last=2,
    )
    assert report.steps[EXPIRE_SNAPSHOTS]["snapshots_expired"] == len(expired)
    assert report.steps[EXPIRE_SNAPSHOTS]["deleted_data_files_count"] == len(originals)
    assert [sid for sid, _ in _snapshots(spark, s, BRONZE)] == kept
    assert not any(p.exists() for p in originals)
    assert report.steps[REMOVE_ORPHAN_FILES]["orphan_files_removed"] == 1
    assert not old_orphan.exists() and young_orphan.exists()  # the default 3-day retention spares the young one
    assert disk_before - _disk_bytes(folder) >= freed_at_least
    assert report.after is not None and report.before is not None
    assert report.before.bytes_on_disk - report.after.bytes_on_disk >= freed_at_least
    assert report.after.rows == report.before.rows

    assert _checksum(spark, s, BRONZE, snapshot_id=kept[0]) == kept_rows  # time travel inside retention
    assert _checksum(spark, s, BRONZE) == current_rows
    with pytest.raises(Exception, match=str(expired[-1])):
        _checksum(spark, s, BRONZE, snapshot_id=expired[-1])


def test_downstream_stream_resumes_after_maintenance_and_unsafe_expiry_is_refused(spark, fresh_settings):
    s = fresh_settings
    defaults = default_registry()
    registry = Registry([_bronze(), defaults.get(SILVER)])
    generate(s.landing, rows=300, files=3, seed=11)
    run_table(spark, s, registry.get(BRONZE))
    run_table(spark, s, registry.get(SILVER))
    generate(s.landing, rows=300, files=3, seed=12)
    run_table(spark, s, registry.get(BRONZE))
    appends = [sid for sid, op in _snapshots(spark, s, BRONZE) if op == "append"]
    assert len(appends) == 6

    [position] = consumer_positions(s, registry, BRONZE)
    assert position.consumer == SILVER and position.committed and position.snapshot_id == appends[2]

    with pytest.raises(PipelineError, match=rf"refusing to expire snapshot\(s\) \[{appends[2]}\].*silver\.events"):
        expire_snapshots(spark, s, registry, BRONZE, older_than=datetime.now(UTC), snapshot_ids=[appends[2]])

    # Nightly maintenance with an aggressive cut-off: everything older than "now", keeping only the last one.
    report = run_maintenance(spark, s, registry, BRONZE, expire_older_than=datetime.now(UTC), retain_last=1)
    expire = report.steps[EXPIRE_SNAPSHOTS]
    assert expire["snapshots_expired"] == 2 and expire["snapshots_held_for_streams"] == 4
    remaining = {sid for sid, _ in _snapshots(spark, s, BRONZE)}
    assert set(appends[2:]) <= remaining and not set(appends[:2]) & remaining
    assert report.after is not None and report.after.data_files < report.before.data_files

    resumed = run_table(spark, s, registry.get(SILVER))
    second_wave = sum(n for name, n in _landed_lines_per_file(s).items() if "-s12-" in name)
    assert resumed.rows_in == second_wave  # exactly the new bronze rows, none re-read from the compacted files
    reference = classify(load_landing(s.landing))
    silver = spark.table(table_format(s).qualified(SILVER))
    assert silver.count() == silver.select("event_id").distinct().count() == len(reference.valid_events)
    assert {r.event_id for r in silver.select("event_id").collect()} == set(reference.valid_events)

    # Control: the guard protects against a real failure. Expiring the consumer's restart snapshot behind the
    # guard's back (a raw CALL) breaks the stream for good.
    generate(s.landing, rows=50, files=1, seed=13)
    run_table(spark, s, registry.get(BRONZE))
    [position] = consumer_positions(s, registry, BRONZE)
    with pytest.raises(PipelineError, match="refusing to expire"):
        expire_snapshots(spark, s, registry, BRONZE, older_than=datetime.now(UTC), snapshot_ids=[position.snapshot_id])
    spark.sql(
        f"CALL {s.catalog_name}.system.expire_snapshots(table => 'bronze.events', "
        f"snapshot_ids => array({position.snapshot_id}))"
    ).collect()
    # The run stops before writing: Iceberg names the expired position, or (while the stream's first snapshot
    # lives, so its initial offset is not moved) says the walk from there no longer reaches the current snapshot.
    with pytest.raises(PipelineError, match=rf"{position.snapshot_id}|not an ancestor of table's current snapshot"):
        run_table(spark, s, registry.get(SILVER))


def test_commit_conflicts_are_retried_then_reported(spark, monkeypatch):
    monkeypatch.setattr(procedures, "_RETRY_WAIT_SECONDS", 0.0)
    conflict = "SELECT raise_error('org.apache.iceberg.exceptions.CommitFailedException: simulated race')"
    with pytest.raises(
        PipelineError, match=r"table bronze.events: rewrite_data_files conflicted with concurrent commits 3"
    ):
        procedures.call_procedure(spark, BRONZE, REWRITE_DATA_FILES, conflict)
    with pytest.raises(PipelineError, match=r"table bronze.events: rewrite_manifests failed: .*no conflict here"):
        procedures.call_procedure(spark, BRONZE, "rewrite_manifests", "SELECT raise_error('no conflict here')")
    rows, attempts = procedures.call_procedure(spark, BRONZE, "rewrite_manifests", "SELECT 1 AS one")
    assert rows[0].one == 1 and attempts == 1


@pytest.mark.slow
def test_compaction_concurrent_with_streaming_ingestion_loses_and_doubles_nothing(spark, fresh_settings):
    s = fresh_settings
    landed = generate(s.landing, rows=1200, files=24, seed=21)
    registry = Registry([_bronze()])
    spec = registry.get(BRONZE)
    compact_policy = replace(spec.maintenance, min_input_files=2)
    qualified = table_format(s).qualified(BRONZE)
    outcome: dict[str, object] = {}

    def ingest() -> None:
        try:
            outcome["report"] = run_table(spark, s, spec)
        except BaseException as exc:  # reported by the main thread
            outcome["error"] = exc

    stream = threading.Thread(target=ingest, name="ingest")
    stream.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and stream.is_alive():
        if spark.catalog.tableExists(qualified) and len(_snapshots(spark, s, BRONZE)) >= 4:
            break
        time.sleep(0.2)
    compactions = []
    while stream.is_alive():
        compactions.append(rewrite_data_files(spark, s, BRONZE, compact_policy))
        time.sleep(0.5)
    stream.join()
    assert "error" not in outcome, outcome.get("error")
    assert outcome["report"].data_batches == 24

    history = [op for _, op in _snapshots(spark, s, BRONZE)]
    assert "replace" in history, "no compaction committed at all"
    first_replace = history.index("replace")
    assert "append" in history[first_replace + 1 :], "no compaction committed while the stream was appending"
    assert sum(c["rewritten_data_files_count"] for c in compactions) > 0

    rows = spark.table(qualified)
    per_file = Counter(
        {
            Path(urlparse(r._source_file).path).name: r.n
            for r in rows.groupBy("_source_file").agg(F.count("*").alias("n")).collect()
        }
    )
    assert per_file == _landed_lines_per_file(s)
    assert rows.count() == landed.lines
    assert rows.select("_batch_id").distinct().count() == 24


def test_dagster_maintenance_asset_schedule_and_sensor(spark, fresh_settings, monkeypatch):
    s = fresh_settings
    monkeypatch.setenv("TRIBUTARY_CATALOG_NAME", s.catalog_name)
    monkeypatch.setenv("TRIBUTARY_SHUFFLE_PARTITIONS", str(s.shuffle_partitions))
    resource = SparkResource(home=str(s.home))
    assert resource.settings() == s  # the resource reaches the test's catalog on the shared SparkSession

    registry = Registry([_bronze(MaintenancePolicy(min_input_files=2, max_small_files=3))])
    sensor = build_compaction_sensor(registry)
    assert isinstance(sensor(build_sensor_context(resources={"spark": resource})), SkipReason)  # no table yet
    generate(s.landing, rows=200, files=5, seed=31)
    run_table(spark, s, registry.get(BRONZE))

    request = sensor(build_sensor_context(resources={"spark": resource}))
    assert isinstance(request, RunRequest)
    # One small file per batch in bronze and in its per-file health table: both are compacted.
    assert request.asset_selection == [maintenance_key(BRONZE), maintenance_key(f"{BRONZE}_files")]
    assert request.run_config["ops"]["maintenance__bronze__events"]["config"]["operations"] == list(
        COMPACTION_OPERATIONS
    )

    defs = Definitions(assets=build_maintenance_assets(registry), jobs=[maintenance_job], resources={"spark": resource})
    job = defs.resolve_job_def(MAINTENANCE_JOB)
    result = job.execute_in_process(
        run_config=request.run_config, asset_selection=request.asset_selection, instance=DagsterInstance.ephemeral()
    )
    assert result.success
    [materialization] = result.asset_materializations_for_node("maintenance__bronze__events")
    meta = {k: v.value for k, v in materialization.metadata.items()}
    assert meta["data_files_before"] >= 5 and meta["data_files_after"] == 1
    assert meta["rows_before"] == meta["rows_after"] == spark.table(table_format(s).qualified(BRONZE)).count()
    assert meta["avg_file_bytes_after"] > meta["avg_file_bytes_before"]
    assert {"manifests_before", "snapshots_after", "bytes_on_disk_after", "seconds"} <= set(meta)
    assert meta["operations"] == ", ".join(COMPACTION_OPERATIONS)
    assert isinstance(sensor(build_sensor_context(resources={"spark": resource})), SkipReason)

    # The shipped definitions load: one maintenance asset per table, the nightly schedule and the sensor.
    full = default_registry()
    shipped = Definitions(
        assets=build_maintenance_assets(full),
        schedules=[maintenance_schedule],
        sensors=[build_compaction_sensor(full)],
        resources={"spark": SparkResource()},
    )
    keys = shipped.resolve_asset_graph().get_all_asset_keys()
    assert {maintenance_key(out.name) for spec in full for out in spec.outputs()} <= set(keys)
    assert shipped.resolve_job_def(MAINTENANCE_JOB).name == MAINTENANCE_JOB
    assert maintenance_schedule.cron_schedule == "0 3 * * *"
