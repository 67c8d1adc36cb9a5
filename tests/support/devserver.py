"""A local `dagster dev` (webserver + daemon) started as a subprocess, and the GraphQL calls the UI makes.

Used by the end-to-end tests (tests/orchestration/test_operations.py) and the freshness benchmark (bench/freshness.py).
The
server runs in its own process group with its own DAGSTER_HOME (holding infra/dagster.yaml, or the cluster profile's
infra/deploy/dagster.yaml) and TRIBUTARY_HOME;
`stop()` ends the whole group: webserver, daemon, code server, run workers and their JVMs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from infra.deploy import LOCAL_INSTANCE
from infra.errors import SetupError
from infra.ports import free_port
from tests.support.jvm import short_lived
from tests.support.repo import REPO

REPOSITORY = "__repository__"
TERMINAL_RUN_STATUSES = {"SUCCESS", "FAILURE", "CANCELED"}
TERMINAL_BACKFILL_STATUSES = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}
T = TypeVar("T")

_RUN_FIELDS = "runId status jobName creationTime startTime endTime tags { key value }"


# Settings for an instance that tests and benchmarks drive: sensors every 5 s, no scheduled run while they run,
# small Spark, each run's JVM set up for a short life (`tests.support.jvm`). The caller adds its own TRIBUTARY_*
# values on top.
QUICK_ENV = short_lived(
    {
        "TRIBUTARY_SENSOR_INTERVAL": "5",
        "TRIBUTARY_PIPELINE_CRON": "0 0 1 1 *",
        "TRIBUTARY_SHUFFLE_PARTITIONS": "2",
        "TRIBUTARY_DRIVER_MEMORY": "1g",
    }
)


def wait_for(check: Callable[[], T | None], timeout: float, what: str, interval: float = 1.0) -> T:
    """Call `check` until it returns something truthy; TimeoutError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class DagsterDev:
    """`dagster dev -w workspace.yaml` on 127.0.0.1:`port` with its own homes; a context manager."""

    def __init__(
        self,
        dagster_home: Path,
        tributary_home: Path,
        env: Mapping[str, str] | None = None,
        port: int | None = None,
        log_path: Path | None = None,
        instance_yaml: Path = LOCAL_INSTANCE,
    ):
        self.dagster_home = Path(dagster_home)
        self.tributary_home = Path(tributary_home)
        self.port = port or free_port()
        self.log_path = Path(log_path) if log_path else self.dagster_home / "dagster-dev.log"
        self.instance_yaml = instance_yaml
        self.env = {
            **os.environ,
            "DAGSTER_HOME": str(self.dagster_home),
            "TRIBUTARY_HOME": str(self.tributary_home),
            **(env or {}),
        }
        self.process: subprocess.Popen | None = None
        self.location = ""  # the code location's name, read from the server once loaded

    @property
    def url(self) -> str:
        """Base URL of the webserver."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 300) -> DagsterDev:
        """Start the server and wait until the code location is loaded."""
        self.dagster_home.mkdir(parents=True, exist_ok=True)
        self.tributary_home.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.instance_yaml, self.dagster_home / "dagster.yaml")
        dagster = Path(sys.executable).parent / "dagster"
        command = [str(dagster), "dev", "-w", str(REPO / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(self.port)]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                command, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            wait_for(self._loaded, timeout, f"dagster dev on {self.url} to load workspace.yaml (log: {self.log_path})")
        except BaseException:
            self.stop()
            raise
        return self

    def _loaded(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise SetupError(f"dagster dev exited with code {self.process.returncode}; see {self.log_path}")
        try:
            data = self.graphql(
                "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus "
                "locationOrLoadError { __typename ... on PythonError { message } } } } } }"
            )
        except (OSError, ValueError):
            return False
        entries = data["workspaceOrError"].get("locationEntries", [])
        if not entries or any(entry["loadStatus"] != "LOADED" for entry in entries):
            return False
        for entry in entries:
            result = entry["locationOrLoadError"] or {}
            if result.get("__typename") == "PythonError":
                raise SetupError(f"code location {entry['name']} failed to load in dagster dev: {result['message']}")
        self.location = entries[0]["name"]
        return True

    def stop(self) -> None:
        """Interrupt dagster dev, then kill whatever is left of its process group."""
        if self.process is None:
            return
        pgid = self.process.pid  # start_new_session: the group id is the leader's pid
        try:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(timeout=20)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            time.sleep(1)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        self.process = None

    def __enter__(self) -> DagsterDev:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _repository(self) -> dict[str, str]:
        return {"repositoryLocationName": self.location, "repositoryName": REPOSITORY}

    def log_text(self) -> str:
        """What dagster dev printed so far (webserver and daemon logs)."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    # --- GraphQL: the API the UI uses -------------------------------------------------------------------------

    def graphql(self, query: str, variables: Mapping[str, Any] | None = None, timeout: float = 60) -> dict:
        """Run a GraphQL query or mutation; raise on transport or GraphQL errors."""
        body = json.dumps({"query": query, "variables": dict(variables or {})}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = json.loads(response.read())
        if payload.get("errors"):
            raise ValueError(f"GraphQL errors: {payload['errors']}")
        return payload["data"]

    def launch_run(
        self,
        job: str,
        run_config: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
        assets: list[str] | None = None,
    ) -> str:
        """Launch (enqueue) a run of `job` as the Launchpad does (optionally only `assets`); return its run id."""
        selector: dict[str, Any] = {**self._repository(), "jobName": job}
        if assets is not None:
            selector["assetSelection"] = [{"path": name.split(".")} for name in assets]
        data = self.graphql(
            """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
                __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
                ... on RunConfigValidationInvalid { errors { message } } ... on InvalidSubsetError { message } } }""",
            {
                "params": {
                    "selector": selector,
                    "runConfigData": dict(run_config or {}),
                    "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]},
                }
            },
        )
        result = data["launchRun"]
        if result["__typename"] != "LaunchRunSuccess":
            raise ValueError(f"launching {job} failed: {result}")
        return result["run"]["runId"]

    def run(self, run_id: str) -> dict:
        """Status, times and tags of one run (tags as a dict)."""
        data = self.graphql(
            f"query($id: ID!) {{ runOrError(runId: $id) {{ __typename ... on Run {{ {_RUN_FIELDS} }} }} }}",
            {"id": run_id},
        )
        return _with_tag_dict(data["runOrError"])

    def runs(self, tags: Mapping[str, str] | None = None, limit: int = 100) -> list[dict]:
        """Recent runs (newest first), optionally only those carrying all `tags`."""
        data = self.graphql(
            f"""query($filter: RunsFilter, $limit: Int) {{ runsOrError(filter: $filter, limit: $limit) {{
                ... on Runs {{ results {{ {_RUN_FIELDS} }} }} }} }}""",
            {"filter": {"tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]}, "limit": limit},
        )
        return [_with_tag_dict(r) for r in data["runsOrError"]["results"]]

    def wait_run(self, run_id: str, timeout: float = 300) -> dict:
        """Wait until the run has finished; return it."""
        return wait_for(
            lambda: (r := self.run(run_id))["status"] in TERMINAL_RUN_STATUSES and r,
            timeout,
            f"run {run_id} to finish",
        )

    def launch_partition_backfill(self, assets: list[str], partitions: list[str]) -> str:
        """Launch a backfill of `partitions` of the assets (`ns.table` names), as the UI's backfill dialog does."""
        data = self.graphql(
            """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
                __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }""",
            {
                "params": {
                    "assetSelection": [{"path": name.split(".")} for name in assets],
                    "partitionNames": partitions,
                }
            },
        )
        result = data["launchPartitionBackfill"]
        if result["__typename"] != "LaunchBackfillSuccess":
            raise ValueError(f"launching the backfill failed: {result}")
        return result["backfillId"]

    def backfill(self, backfill_id: str) -> dict:
        """Status of a backfill and its runs."""
        data = self.graphql(
            f"""query($id: String!) {{ partitionBackfillOrError(backfillId: $id) {{ __typename
                ... on PartitionBackfill {{ id status numPartitions runs(limit: 100) {{ {_RUN_FIELDS} }} }} }} }}""",
            {"id": backfill_id},
        )
        result = data["partitionBackfillOrError"]
        result["runs"] = [_with_tag_dict(r) for r in result.get("runs", [])]
        return result

    def wait_backfill(self, backfill_id: str, timeout: float = 300) -> dict:
        """Wait until the backfill and all its runs have finished; return it."""

        def done() -> dict | None:
            found = self.backfill(backfill_id)
            finished = found["status"] in TERMINAL_BACKFILL_STATUSES
            return found if finished and all(r["status"] in TERMINAL_RUN_STATUSES for r in found["runs"]) else None

        return wait_for(done, timeout, f"backfill {backfill_id} to finish")

    def sensor_ticks(self, sensor: str, limit: int = 20) -> list[dict]:
        """The sensor's latest ticks, newest first: status, timestamp, runIds, skipReason, error."""
        data = self.graphql(
            """query($selector: SensorSelector!, $limit: Int) { sensorOrError(sensorSelector: $selector) {
                __typename ... on Sensor { sensorState { status ticks(limit: $limit) {
                    status timestamp runIds skipReason error { message } } } } } }""",
            {
                "selector": {**self._repository(), "sensorName": sensor},
                "limit": limit,
            },
        )
        return data["sensorOrError"]["sensorState"]["ticks"]

    def stop_sensor(self, sensor: str) -> str:
        """Stop a running sensor as the UI's toggle does; its status afterwards."""
        data = self.graphql(
            """query($selector: SensorSelector!) { sensorOrError(sensorSelector: $selector) {
                __typename ... on Sensor { id } } }""",
            {"selector": {**self._repository(), "sensorName": sensor}},
        )
        stopped = self.graphql(
            """mutation($id: String) { stopSensor(id: $id) { __typename
                ... on StopSensorMutationResult { instigationState { status } } ... on PythonError { message } } }""",
            {"id": data["sensorOrError"]["id"]},
        )["stopSensor"]
        if stopped["__typename"] != "StopSensorMutationResult":
            raise ValueError(f"stopping sensor {sensor} failed: {stopped}")
        return stopped["instigationState"]["status"]

    def materialized_partitions(self, asset: str) -> int:
        """How many partitions of a partitioned asset the instance has recorded as materialized."""
        data = self.graphql(
            """query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) {
                ... on AssetNode { partitionStats { numMaterialized } } } }""",
            {"key": {"path": asset.split(".")}},
        )
        return data["assetNodeOrError"]["partitionStats"]["numMaterialized"]

    def step_attempts(self, run_id: str) -> dict[str, int]:
        """How many attempts each step of a run made (retries show up as more than one)."""
        data = self.graphql(
            """query($id: ID!) { runOrError(runId: $id) {
                ... on Run { stepStats { stepKey attempts { startTime } } } } }""",
            {"id": run_id},
        )
        return {s["stepKey"]: len(s["attempts"]) for s in data["runOrError"]["stepStats"]}

    def dismiss_welcome(self) -> None:
        """Mark the UI's first-visit "join the community" dialog as seen (it would cover a screenshot)."""
        self.graphql("mutation { setNuxSeen }")

    def asset_keys(self) -> set[str]:
        """Every asset the server knows, as `a.b` names."""
        data = self.graphql("{ assetNodes { assetKey { path } } }")
        return {".".join(node["assetKey"]["path"]) for node in data["assetNodes"]}


def _with_tag_dict(run: dict) -> dict:
    run = dict(run)
    run["tags"] = {t["key"]: t["value"] for t in run.get("tags") or []}
    return run
