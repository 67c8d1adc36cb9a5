"""Operations: the landing sensor, UI backfills, reprocess and full refresh, concurrency, retries and failure alerts.

The end-to-end tests drive ONE real `dagster dev` (webserver + daemon) shared by this module, started as a
subprocess with its own DAGSTER_HOME and TRIBUTARY_HOME on a free port, through the GraphQL API the UI uses.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow as pa
import pytest
from dagster import (
    AssetKey,
    BackfillPolicy,
    DagsterEventType,
    DagsterInstance,
    DailyPartitionsDefinition,
    DefaultSensorStatus,
    materialize,
)
from deltalake import DeltaTable
from pyiceberg.expressions import In
from pyspark.sql import functions as F

from infra.catalog import pyiceberg_catalog
from infra.errors import ConfigError, PipelineError
from infra.settings import Settings
from infra.sql.delta_tables import read_commit
from infra.sql.query import run_query
from orchestration.assets import TABLE_POOL, build_table_asset
from orchestration.definitions import PIPELINE_JOB, build_definitions
from orchestration.reprocess import FULL_REFRESH_JOB
from orchestration.resources import SparkResource
from orchestration.schedules import PIPELINE_SCHEDULE
from orchestration.sensors import (
    ERROR_TAG,
    LANDING_SENSOR,
    TRIGGER_TAG,
    LandingCursor,
    affected_assets,
    new_files,
    scan_landing,
    unread,
)
from pipelines.datasets import default_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io.delta import DeltaFormat
from pipelines.io.formats import Merge, table_format
from pipelines.ops.backfill import backfill_days
from pipelines.ops.full_refresh import full_refresh
from pipelines.ops.reprocess import reprocess
from pipelines.run import run_log
from pipelines.run.pipeline import run_pipeline
from tests.support.devserver import QUICK_ENV, DagsterDev, free_port, wait_for
from tests.support.helpers import rows_of, table
from tests.support.reference import classify, load_landing
from tests.support.repo import REPO

ARTIFACTS = REPO / "test-artifacts"
GOLD = "gold.daily_revenue"
EVENT_TABLES = ("bronze.events", "silver.events", "silver.events_quarantine", GOLD, "gold.event_counts_5m")
EVENT_SPECS = ("bronze.events", "silver.events", GOLD, "gold.event_counts_5m")
D1, D2, D3 = date(2026, 11, 1), date(2026, 11, 2), date(2026, 11, 3)


# --- the landing sensor's bookkeeping (no server) ---------------------------------------------------------------


def _land(path: Path, text: str = '{"event_id": "x"}\n') -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_landing_cursor_sees_each_complete_file_once(tmp_path):
    settings = Settings.from_env(home=tmp_path).with_home(tmp_path)
    registry = default_registry()
    events = settings.landing / "events"
    _land(events / "a.json")
    _land(events / ".b.json.tmp")
    _land(events / "c.json.part")  # Spark reads it (no hidden prefix), so it is landed like any other file
    _land(events / "d.json._COPYING_")
    _land(events / "_SUCCESS")
    (events / "folder").mkdir()
    scanned = scan_landing(settings, registry)
    assert set(scanned) == {"events/a.json", "events/c.json.part"}

    new, cursor = new_files(LandingCursor(), scanned, time.time(), 600)
    assert new == ["events/a.json", "events/c.json.part"]
    cursor = LandingCursor.parse(cursor.dump())

    os.replace(events / ".b.json.tmp", events / "b.json")  # the producer renames its temp file into place
    _land(events / "a.json", '{"event_id": "y"}\n')  # the same file dropped again
    new, cursor = new_files(cursor, scan_landing(settings, registry), time.time(), 600)
    assert new == ["events/b.json"]
    new, cursor = new_files(cursor, scan_landing(settings, registry), time.time(), 600)
    assert new == []

    # Much later the names are forgotten (the cursor stays small) but the files stay old.
    new, cursor = new_files(cursor, scan_landing(settings, registry), time.time() + 3600, 600)
    assert new == [] and cursor.recent == {}
    new, _ = new_files(cursor, scan_landing(settings, registry), time.time() + 3600, 600)
    assert new == []

    selected = {".".join(key.path) for key in affected_assets(registry, {"events"})}
    assert selected == {*EVENT_TABLES, "bronze.events_files"}


def test_files_a_run_outside_dagster_already_read_start_no_run(spark, fresh_settings):
    """After `make demo`, the landing sensor's first look finds every file new to it, and read already."""
    registry = default_registry()
    events = fresh_settings.landing / "events"
    _land(events / "a.json")
    run_pipeline(spark, fresh_settings, registry, ["bronze.events"])
    _land(events / "b.json")
    new, _ = new_files(LandingCursor(), scan_landing(fresh_settings, registry), time.time(), 600)
    assert new == ["events/a.json", "events/b.json"]
    assert unread(fresh_settings, registry, new) == ["events/b.json"]


# --- reprocess, backfill, full refresh, retries (in-process, real Spark) ----------------------------------------


def _events_chain(spark, settings) -> list:
    return run_pipeline(spark, settings, default_registry(), EVENT_SPECS)


def _snapshots(spark, settings) -> dict[str, int | None]:
    fmt = table_format(settings)
    return {n: fmt.current_snapshot(spark, n).snapshot_id for n in EVENT_TABLES}


def _operations(spark, settings, name: str) -> list[str]:
    """The `tributary.operation` tags of a table's commits, oldest first."""
    if table_format(settings).format_of(name) == "delta":
        folder = DeltaFormat(settings).location(name)
        infos = [read_commit(folder, v).info for v in range(DeltaTable(str(folder)).version() + 1)]
        return [i["tributary.operation"] for i in infos if "tributary.operation" in i]
    rows = spark.sql(
        f"SELECT summary['tributary.operation'] AS op FROM {settings.catalog_name}.{name}.snapshots "
        "WHERE summary['tributary.operation'] IS NOT NULL ORDER BY committed_at"
    ).collect()
    return [r.op for r in rows]


def _contents(spark, settings, drop=("_batch_id",)) -> dict[str, list[tuple]]:
    return {name: rows_of(table(spark, settings, name), drop=drop) for name in EVENT_TABLES}


@pytest.mark.slow
def test_reprocess_backfill_and_full_refresh_replace_exactly_their_scope(spark, format_settings):
    s = format_settings
    registry = default_registry()
    gen = generate(s.landing, rows=1200, files=3, seed=3)
    _events_chain(spark, s)
    before = _contents(spark, s, drop=())
    unbatched = _contents(spark, s)
    ingested_today = date.today()

    bronze = reprocess(spark, s, registry, "bronze.events", ingested_today, ingested_today)
    assert bronze.rows_before == bronze.rows_after == gen.lines
    assert bronze.extra["files_reread"] == 3
    silver = reprocess(spark, s, registry, "silver.events", D1, D2)
    assert silver.rows_before == silver.rows_after > 0
    after = _contents(spark, s, drop=())
    # Bronze keeps every file's original ingestion time and batch id: identical rows.
    assert after["bronze.events"] == before["bronze.events"]
    # Silver and its quarantine hold the same rows; reprocessed rows carry batch id -1.
    assert _contents(spark, s) == unbatched
    reprocessed = table(spark, s, "silver.events").filter("_batch_id = -1").count()
    assert reprocessed == silver.rows_after
    assert _operations(spark, s, "silver.events") == ["reprocess"]

    # Gold: tamper with two days, backfill one of them: only that day is recomputed, stale keys vanish.
    fmt, keys = table_format(s), ("event_date", "category", "currency")
    zeroed = (
        table(spark, s, GOLD)
        .filter(F.col("event_date").isin(D1, D3))
        .withColumn("revenue", F.lit(0).cast("decimal(18,2)"))
    )
    fmt.merge(zeroed, GOLD, Merge(keys))
    schema = table(spark, s, GOLD).schema
    bogus = spark.createDataFrame([(D1, "bogus", "USD", 1, 1, Decimal("1.00"))], schema)
    fmt.merge(bogus, GOLD, Merge(keys))
    report = backfill_days(spark, s, registry.get(GOLD), D1, D1)
    assert report.rows_before == report.rows_after + 1
    expected = classify(load_landing(s.landing)).daily_revenue()
    got = {
        (r.event_date, r.category, r.currency): (r.orders, r.units, r.revenue) for r in table(spark, s, GOLD).collect()
    }
    assert {k: v for k, v in got.items() if k[0] != D3} == {k: v for k, v in expected.items() if k[0] != D3}
    assert all(v[2] == 0 for k, v in got.items() if k[0] == D3)  # outside the backfilled range: untouched
    backfill_days(spark, s, registry.get(GOLD), D3, D3)
    # A day without data, upstream or in the table: nothing to replace, nothing committed.
    before, empty_day = _snapshots(spark, s), D1 - timedelta(days=30)
    nothing = backfill_days(spark, s, registry.get(GOLD), empty_day, empty_day)
    assert (nothing.rows_before, nothing.rows_after, nothing.snapshot_id) == (0, 0, None)
    assert _snapshots(spark, s) == before
    # Each operation left its row in ops.run_log, as table runs do.
    run_log.fold(s)
    logged = run_query(
        s,
        "SELECT table_name, trigger, status, rows_written FROM ops.run_log WHERE trigger LIKE '%:%' ORDER BY ended_at",
    ).rows
    operations = [("bronze.events", "cli:reprocess"), ("silver.events", "cli:reprocess")] + [(GOLD, "cli:backfill")] * 3
    assert [(r[0], r[1]) for r in logged] == operations and {r[2] for r in logged} == {"succeeded"}
    assert [r[3] for r in logged] == [gen.lines, silver.rows_after, report.rows_after, logged[3][3], 0]

    # The next incremental run neither re-adds nor skips anything, and commits nothing.
    snaps = _snapshots(spark, s)
    reports = _events_chain(spark, s)
    assert all(r.rows_written(name) == 0 for r in reports for name in r.tables)
    assert _snapshots(spark, s) == snaps
    assert _contents(spark, s) == unbatched

    # Land one more file (the day after): only it flows through, exactly once.
    more = generate(s.landing, rows=300, files=1, seed=4, start=datetime(2026, 11, 4), days=1)
    reports = {r.table: r for r in _events_chain(spark, s)}
    assert reports["bronze.events"].rows_written() == more.lines
    assert table(spark, s, "bronze.events").count() == gen.lines + more.lines

    # Errors name the problem: a gold table is backfilled, not reprocessed; a full refresh is confirmed by name.
    with pytest.raises(ConfigError, match="backfill"):
        reprocess(spark, s, registry, GOLD, D1, D1)
    with pytest.raises(ConfigError, match=r"set confirm to 'silver\.events'"):
        full_refresh(spark, s, registry, "silver.events", "silver")
    # Silver's rebuilt stream would replay bronze's appends, but bronze was reprocessed in place: refused.
    with pytest.raises(PipelineError, match=r"full-refresh bronze\.events instead"):
        full_refresh(spark, s, registry, "silver.events", "silver.events")

    # A full refresh of bronze rebuilds it and everything downstream from the landing files: the same tables.
    rebuilt_from_scratch = _contents(spark, s, drop=("_batch_id", "_ingested_at"))
    reports = full_refresh(spark, s, registry, "bronze.events", "bronze.events")
    assert [r.table for r in reports] == list(EVENT_SPECS)
    assert _contents(spark, s, drop=("_batch_id", "_ingested_at")) == rebuilt_from_scratch
    assert all(r.rows_written(n) == 0 for r in _events_chain(spark, s) for n in r.tables)

    # A reprocess needs the landing files it re-reads.
    moved = s.landing / "events" / gen.files[0].name
    moved.rename(moved.with_name("." + moved.name))
    with pytest.raises(PipelineError, match=f"landing file .*{gen.files[0].name}.* no longer exists"):
        reprocess(spark, s, registry, "bronze.events", ingested_today, ingested_today)


class _FlakySpark(SparkResource):
    """The platform resource, except that its first session request fails like a gateway that is not up yet."""

    def session(self):
        if not _FLAKY["failed"]:
            _FLAKY["failed"] = True
            raise ConnectionRefusedError("Spark gateway not reachable (simulated transient error)")
        return super().session()


_FLAKY = {"failed": False}


@pytest.mark.slow
def test_transient_errors_are_retried_and_tributary_errors_are_not(spark, fresh_settings):
    s = fresh_settings
    bronze = build_table_asset(default_registry().get("bronze.events"))
    resource = {"home": str(s.home), "catalog_name": s.catalog_name}
    with DagsterInstance.ephemeral() as instance:
        # gzip data under a name without .gz: a TributaryError, reported once, never retried.
        (s.landing / "events").mkdir(parents=True)
        (s.landing / "events" / "packed.json").write_bytes(gzip.compress(b'{"event_id": "x"}\n'))
        result = materialize(
            [bronze], instance=instance, resources={"spark": SparkResource(**resource)}, raise_on_error=False
        )
        assert not result.success
        assert not [e for e in result.all_events if e.event_type == DagsterEventType.STEP_RESTARTED]
        failure = next(e for e in result.all_events if e.event_type == DagsterEventType.STEP_FAILURE)
        assert "packed.json holds gzip data" in failure.step_failure_data.user_failure_data.description

        (s.landing / "events" / "packed.json").unlink()
        generate(s.landing, rows=200, files=1, seed=6)
        result = materialize([bronze], instance=instance, resources={"spark": _FlakySpark(**resource)})
        assert result.success
        assert len([e for e in result.all_events if e.event_type == DagsterEventType.STEP_RESTARTED]) == 1
        assert table(spark, s, "bronze.events").count() == 200


# --- against a real `dagster dev` --------------------------------------------------------------------------------


class _Webhook:
    """A local HTTP endpoint that records the JSON bodies posted to it (the alert webhook)."""

    def __init__(self) -> None:
        received: list[dict] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                received.append(json.loads(self.rfile.read(length)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.received = received
        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alert"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Ops:
    """The shared server, the platform settings it runs with, and the alert webhook."""

    dev: DagsterDev
    settings: Settings
    webhook: _Webhook

    def gold_rows(self) -> dict[date, list[dict]]:
        """gold.daily_revenue by day, read through pyiceberg (no JVM, no cached metadata)."""
        rows = pyiceberg_catalog(self.settings).load_table(GOLD).scan().to_arrow().to_pylist()
        by_day: dict[date, list[dict]] = {}
        for row in sorted(rows, key=lambda r: (r["event_date"], r["category"], r["currency"])):
            by_day.setdefault(row["event_date"], []).append(row)
        return by_day


@pytest.fixture(scope="module")
def ops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ops]:
    root = tmp_path_factory.mktemp("ops")
    ARTIFACTS.mkdir(exist_ok=True)
    webhook = _Webhook()
    env = {
        **QUICK_ENV,
        "TRIBUTARY_CATALOG_NAME": "ops",
        "TRIBUTARY_PARTITIONS_START": "2026-10-01",
        "TRIBUTARY_ALERT_WEBHOOK": webhook.url,
    }
    settings = replace(Settings.from_env(home=root / "home").with_home(root / "home"), catalog_name="ops")
    dev = DagsterDev(root / "dagster", root / "home", env, log_path=ARTIFACTS / "dagster-dev.log")
    dev.log_path.unlink(missing_ok=True)
    dev.start()
    try:
        yield Ops(dev, settings, webhook)
    finally:
        dev.stop()
        webhook.close()


@pytest.fixture(scope="module")
def landed(ops: Ops, tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """Events landed once (files renamed into place); the runs the landing sensor started for them, finished.

    Usually one run; two if a sensor tick fell between the two renames.
    """
    staging = tmp_path_factory.mktemp("staging")
    generate(staging, rows=1500, files=2, seed=1)
    (ops.settings.landing / "events").mkdir(parents=True, exist_ok=True)
    for path in sorted((staging / "events").glob("*.json")):
        os.replace(path, ops.settings.landing / "events" / path.name)
    wait_for(lambda: ops.dev.runs({TRIGGER_TAG: LANDING_SENSOR}), 120, "the landing sensor to start a run")
    # A skipped tick after the first run was created: both files have been seen.
    wait_for(lambda: ops.dev.sensor_ticks(LANDING_SENSOR, 1)[0]["status"] == "SKIPPED", 120, "a tick with nothing new")
    return [ops.dev.wait_run(r["runId"], 600) for r in ops.dev.runs({TRIGGER_TAG: LANDING_SENSOR})]


@pytest.mark.slow
def test_landing_sensor_carries_new_files_to_gold_once(ops, landed):
    assert [r["status"] for r in landed] in (["SUCCESS"], ["SUCCESS", "SUCCESS"])
    expected = classify(load_landing(ops.settings.landing)).daily_revenue()
    got = {
        (day, r["category"], r["currency"]): (r["orders"], r["units"], r["revenue"])
        for day, rows in ops.gold_rows().items()
        for r in rows
    }
    assert got == expected
    # The incremental run recorded the days it changed as materialized partitions.
    assert ops.dev.materialized_partitions(GOLD) == len({day for day, _, _ in expected})

    # The same files dropped again (rewritten and renamed into place), plus temp and hidden files: no run.
    events = ops.settings.landing / "events"
    dropped_again = time.time()
    for path in sorted(events.glob("*.json")):
        temp = path.with_name(f".{path.name}.tmp")
        temp.write_bytes(path.read_bytes())
        os.replace(temp, path)
    _land(events / "late.json._COPYING_")
    _land(events / ".hidden.json")
    wait_for(
        lambda: [t for t in ops.dev.sensor_ticks(LANDING_SENSOR) if t["timestamp"] > dropped_again + 1][1:],
        120,
        "two landing-sensor ticks after the files were dropped again",
    )
    assert {r["runId"] for r in ops.dev.runs({TRIGGER_TAG: LANDING_SENSOR})} == {r["runId"] for r in landed}
    assert all(not t["runIds"] for t in ops.dev.sensor_ticks(LANDING_SENSOR) if t["timestamp"] > dropped_again)


@pytest.mark.slow
def test_partition_backfill_from_the_ui_replaces_only_those_days(ops, landed):
    tbl = pyiceberg_catalog(ops.settings).load_table(GOLD)
    original = ops.gold_rows()
    assert {D1, D2, D3} <= set(original)
    # Break the two days by hand: zero revenue on D1, a key that does not exist on D2.
    tampered = [{**r, "revenue": 0} for r in original[D1]] + [*original[D2], {**original[D2][0], "category": "bogus"}]
    schema = tbl.scan().to_arrow().schema
    tbl.overwrite(pa.Table.from_pylist(tampered, schema=schema), overwrite_filter=In("event_date", [D1, D2]))
    assert ops.gold_rows()[D1] != original[D1]
    other_files = _data_files(ops, exclude=(D1, D2))

    backfill_id = ops.dev.launch_partition_backfill([GOLD], [D1.isoformat(), D2.isoformat()])
    backfill = ops.dev.wait_backfill(backfill_id, 600)
    assert backfill["status"] in ("COMPLETED", "COMPLETED_SUCCESS")
    assert [r["status"] for r in backfill["runs"]] == ["SUCCESS"]  # single-run backfill policy: one run, one JVM
    run_tags = backfill["runs"][0]["tags"]
    assert run_tags["dagster/asset_partition_range_start"] == D1.isoformat()
    assert run_tags["dagster/asset_partition_range_end"] == D2.isoformat()

    after = ops.gold_rows()
    assert after[D1] == original[D1] and after[D2] == original[D2]  # recomputed from silver, the bogus key gone
    unchanged = {d: r for d, r in original.items() if d not in (D1, D2)}
    assert {d: r for d, r in after.items() if d not in (D1, D2)} == unchanged
    assert _data_files(ops, exclude=(D1, D2)) == other_files  # the other days' files were not even rewritten
    # The backfill's run is in ops.run_log under its Dagster run id (the run log sensor, or this fold, commits it).
    run_log.fold(ops.settings)
    run_id = backfill["runs"][0]["runId"]
    log = pyiceberg_catalog(ops.settings).load_table("ops.run_log").scan(row_filter=In("run_id", [run_id]))
    logged = [(r["table_name"], r["trigger"], r["status"]) for r in log.to_arrow().to_pylist()]
    assert logged == [(GOLD, "dagster:backfill", "succeeded")]


def _data_files(ops: Ops, exclude: tuple[date, ...]) -> set[str]:
    files = pyiceberg_catalog(ops.settings).load_table(GOLD).inspect.files().to_pylist()
    return {f["file_path"] for f in files if f["partition"]["event_date"] not in exclude}


@pytest.mark.slow
def test_a_second_writer_waits_and_its_failure_is_recorded(ops, landed):
    dev = ops.dev
    gold_snapshot = pyiceberg_catalog(ops.settings).load_table(GOLD).current_snapshot().snapshot_id
    first = dev.launch_run(PIPELINE_JOB, assets=["bronze.events", "bronze.events_files"])
    refresh = {"ops": {"full_refresh": {"config": {"table": GOLD, "confirm": "gold.daily_revenu"}}}}
    second = dev.launch_run(FULL_REFRESH_JOB, run_config=refresh)

    # A dequeued run holds the pool from STARTING on; the first run has nothing new, so it may end within a poll.
    seen_waiting = False
    while (one := dev.run(first))["status"] not in ("SUCCESS", "FAILURE", "CANCELED"):
        two = dev.run(second)
        running = ("STARTING", "STARTED")
        assert not (one["status"] in running and two["status"] in running), "both runs write at once"
        seen_waiting |= one["status"] in running and two["status"] == "QUEUED"
        time.sleep(0.5)
    two = dev.wait_run(second, 300)
    assert one["status"] == "SUCCESS" and seen_waiting
    assert two["startTime"] >= one["endTime"]
    assert f"Run {second} is blocked by global concurrency limits" in dev.log_text()
    assert "tributary_tables" in dev.log_text()

    # The refused full refresh failed at once (no retry for a TributaryError), wrote nothing, and said why:
    # in the run's tags (runs list) and to the alert webhook.
    assert two["status"] == "FAILURE"
    assert dev.step_attempts(second) == {"full_refresh": 1}
    error = wait_for(lambda: dev.run(second)["tags"].get(ERROR_TAG), 120, "the failure sensor to tag the run")
    assert "set confirm to 'gold.daily_revenue'" in error
    alert = wait_for(lambda: [a for a in ops.webhook.received if a["run_id"] == second], 60, "the webhook alert")[0]
    assert alert["job"] == FULL_REFRESH_JOB and "set confirm to" in alert["error"]
    assert pyiceberg_catalog(ops.settings).load_table(GOLD).current_snapshot().snapshot_id == gold_snapshot


@pytest.mark.slow
def test_ui_serves_the_asset_graph(ops, landed):
    assert set(EVENT_TABLES) <= ops.dev.asset_keys()
    ops.dev.dismiss_welcome()
    shot = ARTIFACTS / "asset-graph.png"
    shot.unlink(missing_ok=True)
    profile = ARTIFACTS / "chromium-profile"
    subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            f"--screenshot={shot}",
            "--window-size=1400,900",
            "--virtual-time-budget=15000",
            f"{ops.dev.url}/assets/gold/daily_revenue?view=lineage&lineageScope=upstream&lineageDepth=3",
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 30_000  # a blank page is a few KB


def test_definitions_wire_partitions_pools_schedule_and_sensors(monkeypatch):
    monkeypatch.setenv("TRIBUTARY_PIPELINE_CRON", "*/15 * * * *")
    monkeypatch.setenv("TRIBUTARY_PARTITIONS_START", "2026-10-01")
    defs = build_definitions()
    graph = defs.resolve_asset_graph()
    gold = graph.get(AssetKey(["gold", "daily_revenue"]))
    assert isinstance(gold.partitions_def, DailyPartitionsDefinition)
    assert gold.partitions_def.get_first_partition_key() == "2026-10-01"
    assert gold.backfill_policy == BackfillPolicy.single_run()
    assert graph.get(AssetKey(["silver", "events"])).partitions_def is None
    for name in EVENT_TABLES:
        assert defs.resolve_assets_def(AssetKey(name.split("."))).op.pool == TABLE_POOL
    assert defs.resolve_schedule_def(PIPELINE_SCHEDULE).cron_schedule == "*/15 * * * *"
    assert defs.resolve_sensor_def(LANDING_SENSOR).default_status == DefaultSensorStatus.RUNNING
    monkeypatch.setenv("TRIBUTARY_PIPELINE_CRON", "every hour")
    with pytest.raises(ConfigError, match="TRIBUTARY_PIPELINE_CRON='every hour'"):
        build_definitions()
