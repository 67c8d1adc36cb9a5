"""The cluster profile on a real one-host cluster: a Spark standalone master and two 1-core workers, PostgreSQL
for the Iceberg catalog and the Dagster instance, and Dagster runs launched through the instance's run queue."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psycopg2
import pytest

from infra.catalog import catalog_at, pyiceberg_catalog
from infra.deploy import CLUSTER_INSTANCE, local_cluster, standalone
from infra.ports import free_port
from infra.settings import Settings
from infra.spark import get_spark
from orchestration.definitions import PIPELINE_JOB
from orchestration.sensors import LANDING_SENSOR, TRIGGER_TAG
from pipelines.datasets import default_registry, land_demo
from pipelines.run.pipeline import run_pipeline
from tests.support.devserver import QUICK_ENV, DagsterDev, wait_for
from tests.support.helpers import ALL_TABLES
from tests.support.homes import make_settings
from tests.support.jvm import short_lived
from tests.support.object_storage import TEST_BUCKET
from tests.support.repo import REPO

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

# Columns a run stamps with its own clock: equal tables differ only there.
VOLATILE = ("_ingested_at", "recorded_at")


@pytest.fixture(scope="module")
def cluster() -> Iterator[local_cluster.Cluster]:
    """Master, two workers and PostgreSQL on free ports; everything stopped afterwards, also when a test failed."""
    # Not under pytest's temporary folder: PostgreSQL runs as its own user, which must reach its data folder.
    folder = Path(tempfile.mkdtemp(prefix="tributary-cluster-"))
    ports = {name: free_port() for name in local_cluster.DEFAULT_PORTS}
    try:
        started = local_cluster.up(folder, workers=2, cores=1, memory="1500m", ports=ports)  # stops what it started
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    try:
        yield started
    finally:
        pids = [int(p.read_text()) for p in (folder / "pids").glob("*.pid")]
        stopped = local_cluster.down(folder)
        left = [pid for pid in pids if standalone.process_running(pid)]
        shutil.rmtree(folder, ignore_errors=True)
        assert sorted(stopped) == ["master", "postgres", "worker-0", "worker-1"] and not left, (stopped, left)


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both demo datasets landed once; every home below reads this folder."""
    folder = tmp_path_factory.mktemp("landing")
    land_demo(folder, rows=2000, files=2, seed=5)
    return folder


def _contents(
    settings: Settings, tables: tuple[str, ...], volatile: tuple[str, ...] = VOLATILE
) -> dict[str, list[str]]:
    """Each existing table's rows without volatile columns, as sorted JSON (read with pyiceberg, no JVM)."""
    catalog = pyiceberg_catalog(settings)
    contents = {}
    for name in tables:
        if catalog.table_exists(name):
            rows = catalog.load_table(name).scan().to_arrow().to_pylist()
            contents[name] = sorted(
                json.dumps({k: v for k, v in r.items() if k not in volatile}, default=str) for r in rows
            )
    return contents


def _without_batch(row: str) -> str:
    return json.dumps({k: v for k, v in json.loads(row).items() if k != "_batch_id"})


def _snapshots(settings: Settings, table: str) -> int:
    return len(pyiceberg_catalog(settings).load_table(table).snapshots())


@pytest.fixture(scope="module")
def local_run(spark, landing: Path, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """The demo pipeline run locally (local[*], SQLite catalog) on the same landed files: its home."""
    settings = replace(make_settings(tmp_path_factory.mktemp("local")), landing=landing)
    assert get_spark(settings) is spark  # registers this home's catalog on the shared session
    run_pipeline(spark, settings, default_registry())
    return settings


@pytest.fixture(scope="module")
def reference(local_run: Settings) -> dict[str, list[str]]:
    """Every table of the local run."""
    return _contents(local_run, ALL_TABLES)


def _cluster_settings(cluster: local_cluster.Cluster, home: Path, landing: Path, catalog: str, monkeypatch) -> Settings:
    for key, value in cluster.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("TRIBUTARY_CATALOG_NAME", catalog)
    return replace(Settings.from_env(home=home), landing=landing)


def _dev(cluster: local_cluster.Cluster, root: Path, landing: Path, catalog: str, **extra: str) -> DagsterDev:
    env = {**QUICK_ENV, **cluster.env(), "TRIBUTARY_LANDING": str(landing), "TRIBUTARY_CATALOG_NAME": catalog, **extra}
    return DagsterDev(root / "dagster", root / "home", env, instance_yaml=CLUSTER_INSTANCE)


def _executor_workers(event_logs: Path) -> dict[str, set[str]]:
    """From the cluster applications' event logs (`app-*`; `local-*` are the local sessions that infer schemas
    while Dagster loads the definitions): the worker (its web UI port) of each executor that ran a task."""
    worker_of, ran = {}, set()
    apps = sorted(event_logs.glob("app-*"))
    assert len(apps) == 1, apps  # the run's driver, and nothing else on the cluster
    for log in apps:
        for line in log.read_text().splitlines():
            event = json.loads(line)
            if event["Event"] == "SparkListenerExecutorAdded":
                stdout = event["Executor Info"]["Log Urls"]["stdout"]
                worker_of[event["Executor ID"]] = stdout.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]
            elif event["Event"] == "SparkListenerTaskEnd":
                ran.add(event["Task Info"]["Executor ID"])
    return {"ports": {worker_of[e] for e in ran if e in worker_of}, "executors": ran}


def _dagster_runs(cluster: local_cluster.Cluster, run_ids: list[str]) -> dict[str, str]:
    """The status of each run as stored in the cluster's PostgreSQL database."""
    server = cluster.postgres
    db = psycopg2.connect(
        host="127.0.0.1", port=server.port, user="tributary", password=server.password, dbname="dagster"
    )
    try:
        with db.cursor() as cursor:
            cursor.execute("SELECT run_id, status FROM runs WHERE run_id = ANY(%s)", (run_ids,))
            return dict(cursor.fetchall())
    finally:
        db.close()


def test_the_demo_pipeline_run_by_the_dagster_daemon_on_the_cluster_equals_a_local_run(
    cluster, landing, reference, tmp_path, monkeypatch
):
    """Files already landed: the daemon's landing sensor launches one run through the queue, on the cluster."""
    events = tmp_path / "spark-events"
    events.mkdir()
    # One plain file per application (Spark 4 rolls and compresses event logs by default)
    plain = "spark.eventLog.rolling.enabled=false,spark.eventLog.compress=false"
    conf = f"spark.eventLog.enabled=true,{plain},spark.eventLog.dir={events.as_uri()}"
    with _dev(cluster, tmp_path, landing, "demo", **short_lived({"TRIBUTARY_SPARK_CONF": conf})) as dev:
        launched = wait_for(lambda: dev.runs({TRIGGER_TAG: LANDING_SENSOR}), 120, "the landing sensor to start a run")
        run = dev.wait_run(launched[0]["runId"], 900)
        assert run["status"] == "SUCCESS", dev.log_text()[-3000:]
        assert [r["runId"] for r in dev.runs()] == [run["runId"]]
    settings = _cluster_settings(cluster, tmp_path / "home", landing, "demo", monkeypatch)
    assert settings.deployment.cluster and not settings.uses_sqlite
    on_cluster = _contents(settings, ALL_TABLES)
    assert sorted(on_cluster) == sorted(reference) and len(reference) > 20
    for name, rows in reference.items():
        assert on_cluster[name] == rows, name
    assert sum(map(len, reference.values())) > 5000
    used = _executor_workers(events)
    assert used["ports"] == {str(port) for port in cluster.worker_uis}, used
    assert _dagster_runs(cluster, [run["runId"]]) == {run["runId"]: "SUCCESS"}


@pytest.fixture(scope="module")
def quiet_dev(cluster: local_cluster.Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DagsterDev]:
    """One Dagster instance on the cluster for the tests that launch their runs themselves: its landing sensor is
    stopped before anything lands, and each run names its own home and catalog in its resource config (as a
    Launchpad user would), so the tests share the instance and nothing else."""
    root = tmp_path_factory.mktemp("quiet-dev")
    with _dev(cluster, root, root / "no-landing", "quiet") as dev:
        assert dev.stop_sensor(LANDING_SENSOR) == "STOPPED"
        yield dev


def _launch_together(
    dev: DagsterDev, landing: Path, home: Path, catalog: str, *selections: list[str], max_cores: int | None = None
) -> list[dict]:
    """Land the files into `home` (so only these runs write), launch one run per asset selection at once, each on
    `home` and `catalog` (and at most `max_cores` cores), and wait for all of them."""
    shutil.copytree(landing, home / "landing")
    config: dict = {"home": str(home), "catalog_name": catalog}
    if max_cores is not None:
        config["spark_config"] = {"spark.cores.max": str(max_cores)}
    run_config = {"resources": {"spark": {"config": config}}}
    run_ids = [dev.launch_run(PIPELINE_JOB, run_config=run_config, assets=selection) for selection in selections]
    runs = [dev.wait_run(run_id, 600) for run_id in run_ids]
    assert [r["status"] for r in runs] == ["SUCCESS"] * len(runs), dev.log_text()[-3000:]
    return runs


def _landed_as_reference(written: dict[str, list[str]], late: Path, landing: Path) -> dict[str, list[str]]:
    """`written` with the copied landing folder's path put back (lineage names the file each row came from)."""
    return {name: [row.replace(str(late), str(landing)) for row in rows] for name, rows in written.items()}


def test_two_runs_of_different_tables_at_once_both_land_every_row(
    cluster, quiet_dev, landing, reference, tmp_path, monkeypatch
):
    """Two Dagster runs, one core each, writing different tables through the PostgreSQL catalog at the same time."""
    home, names = tmp_path / "home", ("bronze.events", "bronze.impressions")
    selections = ([names[0], f"{names[0]}_files"], [names[1], f"{names[1]}_files"])
    runs = _launch_together(quiet_dev, landing, home, "together", *selections, max_cores=1)
    (a, b) = runs
    assert a["startTime"] < b["endTime"] and b["startTime"] < a["endTime"], "the runs did not overlap"
    settings = _cluster_settings(cluster, home, home / "landing", "together", monkeypatch)
    written = _contents(settings, names)
    assert _landed_as_reference(written, home / "landing", landing) == {name: reference[name] for name in names}
    ids = [r["runId"] for r in runs]
    assert _dagster_runs(cluster, ids) == dict.fromkeys(ids, "SUCCESS")


def test_two_runs_of_one_table_at_once_take_turns_and_land_each_row_once(
    cluster, quiet_dev, landing, reference, local_run, tmp_path, monkeypatch
):
    """No core limit: the first run holds every core, the second waits for executors (holding no lock), then
    finds everything written. A run that took the table's lock before its executors would wait forever."""
    home, table = tmp_path / "home", "bronze.events"
    runs = _launch_together(quiet_dev, landing, home, "turns", [table, f"{table}_files"], [table, f"{table}_files"])
    settings = _cluster_settings(cluster, home, home / "landing", "turns", monkeypatch)
    written = _contents(settings, (table,))
    assert _landed_as_reference(written, home / "landing", landing) == {table: reference[table]}
    assert len(runs) == 2 and _snapshots(settings, table) == _snapshots(local_run, table), "the second run wrote again"


def _run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    command = [str(Path(sys.executable).parent / "tributary"), *args]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def test_workers_without_the_drivers_python_stop_the_run_with_one_line(cluster, landing, tmp_path, monkeypatch):
    env = {**os.environ, **QUICK_ENV, **cluster.env(), "TRIBUTARY_HOME": str(tmp_path / "home")}
    env |= {
        "TRIBUTARY_LANDING": str(landing),
        "TRIBUTARY_CATALOG_NAME": "nopython",
        "PYSPARK_PYTHON": "/no/such/python",
    }
    done = _run_cli(env, "run", "bronze.events")
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("tributary: error: the cluster's workers have no Python at /no/such/python (PYSPARK_PYTHON)")
    assert "Traceback" not in done.stderr
    settings = _cluster_settings(cluster, tmp_path / "home", landing, "nopython", monkeypatch)
    assert _contents(settings, ("bronze.events",)) == {}
    assert standalone.master_state(cluster.master_ui)["aliveworkers"] == 2


def test_a_cluster_that_gives_no_executor_stops_the_run_with_one_line(cluster, landing, tmp_path, monkeypatch):
    """Executors bigger than any worker never start: the run says so after TRIBUTARY_EXECUTOR_WAIT seconds."""
    env = {**os.environ, **QUICK_ENV, **cluster.env(), "TRIBUTARY_HOME": str(tmp_path / "home")}
    env |= {"TRIBUTARY_LANDING": str(landing), "TRIBUTARY_CATALOG_NAME": "toobig"}
    env |= {"TRIBUTARY_EXECUTOR_MEMORY": "8g", "TRIBUTARY_EXECUTOR_WAIT": "5"}
    done = _run_cli(env, "run", "bronze.events")
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"tributary: error: no executor of {cluster.master} ran a task within 5 s"), last
    assert "TRIBUTARY_EXECUTOR_MEMORY" in last and "TRIBUTARY_EXECUTOR_WAIT" in last and "Traceback" not in done.stderr
    settings = _cluster_settings(cluster, tmp_path / "home", landing, "toobig", monkeypatch)
    assert _contents(settings, ("bronze.events",)) == {}
    state = standalone.master_state(cluster.master_ui)
    assert state["aliveworkers"] == 2 and state["activeapps"] == [], "the refused run's application is still there"


def test_the_cluster_writes_tables_into_a_bucket_equal_to_a_local_run(
    cluster, landing, reference, s3_server, tmp_path, monkeypatch
):
    """Object storage as the cluster's table storage: the executors write through s3a (shipped as spark.jars)."""
    bucket = {"TRIBUTARY_WAREHOUSE": f"s3a://{TEST_BUCKET}/cluster", **s3_server.store().environment()}
    env = {**os.environ, **QUICK_ENV, **cluster.env(), "TRIBUTARY_HOME": str(tmp_path / "home"), **bucket}
    env |= {"TRIBUTARY_LANDING": str(landing), "TRIBUTARY_CATALOG_NAME": "inbucket"}
    done = _run_cli(env, "run", "gold.daily_revenue", "--with-upstream")
    assert done.returncode == 0, done.stderr[-3000:]
    for key, value in bucket.items():
        monkeypatch.setenv(key, value)
    settings = _cluster_settings(cluster, tmp_path / "home", landing, "inbucket", monkeypatch)
    assert settings.warehouse_url == f"s3a://{TEST_BUCKET}/cluster"
    names = ("bronze.events", "silver.events", "silver.events_quarantine", "gold.daily_revenue")
    assert _contents(settings, names) == {name: reference[name] for name in names}
    stored = s3_server.data_dir / "buckets" / TEST_BUCKET / "cluster" / "silver" / "events" / "data"
    assert any(stored.rglob("*.parquet")) and not (tmp_path / "home" / "warehouse").exists()


EVENT_CHAIN = (
    "bronze.events",
    "bronze.events_files",
    "silver.events",
    "silver.events_quarantine",
    "gold.daily_revenue",
)


def test_a_local_home_migrated_into_the_clusters_catalog_goes_on_where_it_stopped(
    cluster, landing, reference, spark, tmp_path, monkeypatch
):
    """A laptop home (SQLite catalog) read the first events file; `tributary catalog migrate` moves its tables into
    the cluster's PostgreSQL; the second file lands and a cluster run reads only it: every table equals the run
    over both files, and no table lost its history."""
    late = tmp_path / "landing"
    (late / "events").mkdir(parents=True)
    first, second = sorted((landing / "events").iterdir())
    shutil.copy(first, late / "events" / first.name)
    local = replace(make_settings(tmp_path / "home"), landing=late)
    assert get_spark(local) is spark
    run_pipeline(spark, local, default_registry(), ["gold.daily_revenue"], include_upstream=True)
    history = {name: pyiceberg_catalog(local).load_table(name).snapshots() for name in EVENT_CHAIN}

    target = cluster.env()["TRIBUTARY_CATALOG_URI"]
    env = {**os.environ, **QUICK_ENV, "TRIBUTARY_HOME": str(local.home), "TRIBUTARY_LANDING": str(late)}
    env |= {"TRIBUTARY_CATALOG_NAME": local.catalog_name}
    for key in ("TRIBUTARY_CATALOG_URI", "TRIBUTARY_CATALOG_SQLALCHEMY_URI"):
        env.pop(key, None)
    # An interrupted migration registered one table already: it is found at the same metadata and kept.
    on_cluster = _cluster_settings(cluster, local.home, late, local.catalog_name, monkeypatch)
    into = catalog_at(on_cluster, cluster.postgres.url("tributary"))
    into.create_namespace_if_not_exists("bronze")
    into.register_table("bronze.events", pyiceberg_catalog(local).load_table("bronze.events").metadata_location)
    moved = _run_cli(env, "catalog", "migrate", "--to", target)
    assert moved.returncode == 0, moved.stderr[-2000:]
    assert "already registered there (an earlier, interrupted migration): 1" in moved.stdout
    assert cluster.postgres.password not in moved.stdout + moved.stderr
    again = _run_cli(env, "catalog", "migrate", "--to", target)
    assert again.returncode == 2 and "already uses catalog jdbc:postgresql://127.0.0.1:" in again.stderr
    old = _run_cli(env, "run", "bronze.events")  # the laptop's catalog no longer holds the home's tables
    assert old.returncode == 2 and "holds the checkpoints of tables in catalog jdbc:postgresql" in old.stderr

    shutil.copy(second, late / "events" / second.name)
    ran = _run_cli(
        {**env, **cluster.env(), "TRIBUTARY_HOME": str(local.home)}, "run", "gold.daily_revenue", "--with-upstream"
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    # Read in two runs, the second file's rows carry batch ids of their own.
    contents = _landed_as_reference(_contents(on_cluster, EVENT_CHAIN, (*VOLATILE, "_batch_id")), late, landing)
    assert contents == {name: sorted(_without_batch(row) for row in reference[name]) for name in EVENT_CHAIN}
    catalog = pyiceberg_catalog(on_cluster)
    for name, snapshots in history.items():  # the local snapshots are still the table's history
        kept = catalog.load_table(name).snapshots()
        assert kept[: len(snapshots)] == snapshots, name
    assert len(catalog.load_table("bronze.events").snapshots()) == len(history["bronze.events"]) + 1
