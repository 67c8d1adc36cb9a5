"""Bad input gets one clear message naming what is at fault, never a stack dump."""

from __future__ import annotations

import gzip
import ipaddress
import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from infra.errors import ConfigError, PipelineError
from infra.identifiers import validate_table_name
from infra.settings import Settings
from pipelines.datasets import default_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.run.pipeline import run_pipeline
from tests.support.repo import REPO, TRIBUTARY


def _cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [TRIBUTARY, *args], capture_output=True, text=True, env=env or dict(os.environ), timeout=300, cwd=cwd
    )


def _clean_env(home: Path, **settings: str) -> dict[str, str]:
    """This process's environment without `TRIBUTARY_*`/`SPARK_LOCAL_IP`, plus a home and `settings`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUTARY_") and k != "SPARK_LOCAL_IP"}
    return {**env, "TRIBUTARY_HOME": str(home), **settings}


def test_missing_landing_folders_mean_nothing_landed(spark, fresh_settings):
    """A fresh home without any landing folder: every table runs, writes nothing, and says why."""
    reports = run_pipeline(spark, fresh_settings, default_registry())
    file_reports = [r for r in reports if r.note is not None]
    assert {r.table for r in file_reports} == {spec.name for spec in default_registry() if spec.files_table is not None}
    assert all("nothing has landed yet" in r.note and "does not exist" in r.note for r in file_reports)
    assert sum(r.rows_in for r in reports) == 0
    assert all(stats.rows == 0 and stats.snapshot_id is None for r in reports for stats in r.tables.values())


def test_unreadable_landing_file_names_the_file(spark, fresh_settings):
    s = fresh_settings
    generate(s.landing, rows=100, files=1, seed=3)
    bad = s.landing / "events" / "broken.json.gz"
    bad.write_bytes(gzip.compress(b'{"event_id": "x"}\n' * 50)[:40])  # a truncated gzip stream
    with pytest.raises(PipelineError, match=r"broken\.json\.gz"):
        run_pipeline(spark, s, default_registry(), ["bronze.events"])


def test_truncated_gzip_file_is_one_line_on_the_terminal(tmp_path):
    """Spark's ~340 lines about the failed task go to the home's log, not the terminal."""
    home = tmp_path / "home"
    generate(home / "landing", rows=100, files=1, seed=3)
    bad = home / "landing" / "events" / "broken.json.gz"
    bad.write_bytes(gzip.compress(b'{"event_id": "x"}\n' * 5000)[:-40])
    result = _cli("run", "bronze.events", env=_clean_env(home), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        f"tributary: error: table bronze.events: landing file {bad} cannot be read (EOFError: Compressed file "
        "ended before the end-of-stream marker was reached); fix or remove it and re-run (nothing of the failed "
        "batch was committed)\n"
    )
    assert "java.io.EOFException" in (home / "logs" / "spark-failures.log").read_text()


def test_broken_link_in_landing_is_reported(spark, fresh_settings):
    s = fresh_settings
    generate(s.landing, rows=100, files=1, seed=3)
    (s.landing / "events" / "gone.json").symlink_to(s.landing / "nowhere.json")
    with pytest.raises(PipelineError, match=r"gone\.json"):
        run_pipeline(spark, s, default_registry(), ["bronze.events"])


@pytest.mark.parametrize("name", ["Gold.daily", "gold.daily-revenue", "gold", "gold.x; DROP TABLE y", "a.b.c"])
def test_invalid_table_names_are_refused(name):
    with pytest.raises(ConfigError, match="not a valid identifier"):
        validate_table_name(name)


def test_cli_reports_errors_without_traceback(tmp_path):
    env = {**os.environ, "TRIBUTARY_HOME": str(tmp_path)}
    bad_name = _cli("run", "gold.daily-revenue", env=env)
    assert bad_name.returncode == 2
    assert "not a valid identifier" in bad_name.stderr and "Traceback" not in bad_name.stderr
    unknown = _cli("run", "gold.nope", env=env)
    assert unknown.returncode == 2
    assert (
        "known tables: " in unknown.stderr
        and "gold.daily_revenue" in unknown.stderr
        and "Traceback" not in unknown.stderr
    )
    bad_setting = _cli("run", env={**env, "TRIBUTARY_TABLE_FORMAT": "orc"})
    assert bad_setting.returncode == 2 and "TRIBUTARY_TABLE_FORMAT='orc'" in bad_setting.stderr


def test_missing_java_is_reported(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # A PATH with the venv's tools but no java.
    os.symlink(sys.executable, bin_dir / "python")
    env = {**os.environ, "PATH": str(bin_dir), "TRIBUTARY_HOME": str(tmp_path), "JAVA_HOME": ""}
    result = _cli("setup", env=env)
    assert result.returncode == 2
    assert "Java 17 is required" in result.stderr and "Traceback" not in result.stderr
    assert shutil.which("java", path=str(bin_dir)) is None


# Item 10 of issue 17: each bad setting is one line naming the variable and the fix, before any JVM starts.
# `{tmp}` is the test's folder (also the working directory, so the suggested folder is `{tmp}/.tributary`); `afile`
# is a regular file there, so paths below it can never be created, not even by root.
BAD_SETTINGS = {
    "stage landing megabytes": (
        "run",
        {"TRIBUTARY_STAGE_LANDING_MB": "abc"},
        "TRIBUTARY_STAGE_LANDING_MB must be a whole number of megabytes (0 or more), got 'abc'",
    ),
    "lock wait seconds": (
        "run",
        {"TRIBUTARY_LOCK_WAIT": "1.5"},
        "TRIBUTARY_LOCK_WAIT must be a whole number of seconds (0 or more), got '1.5'",
    ),
    "home not writable": (
        "run",
        {"TRIBUTARY_HOME": "{tmp}/afile/home"},
        "TRIBUTARY_HOME={tmp}/afile/home is not writable ({tmp}/afile is not a folder); "
        "set TRIBUTARY_HOME to a folder you can write, e.g. {tmp}/.tributary",
    ),
    "checkpoints not writable": (
        "run",
        {"TRIBUTARY_CHECKPOINTS": "{tmp}/afile/checkpoints"},
        "TRIBUTARY_CHECKPOINTS={tmp}/afile/checkpoints is not writable ({tmp}/afile is not a folder); "
        "set TRIBUTARY_CHECKPOINTS to a folder you can write, e.g. {tmp}/.tributary/checkpoints",
    ),
    "scratch not writable": (
        "run",
        {"TRIBUTARY_SCRATCH": "{tmp}/afile/scratch"},
        "TRIBUTARY_SCRATCH={tmp}/afile/scratch is not writable ({tmp}/afile is not a folder); "
        "set TRIBUTARY_SCRATCH to a folder you can write, e.g. {tmp}/.tributary/tmp",
    ),
    "landing not writable": (
        "generate",
        {"TRIBUTARY_LANDING": "{tmp}/afile/landing"},
        "TRIBUTARY_LANDING={tmp}/afile/landing is not writable ({tmp}/afile is not a folder); "
        "set TRIBUTARY_LANDING to a folder you can write, e.g. {tmp}/.tributary/landing",
    ),
    "driver memory": (
        "run",
        {"TRIBUTARY_DRIVER_MEMORY": "lots"},
        "TRIBUTARY_DRIVER_MEMORY='lots' is not a JVM memory size; use a whole number and a unit k, m, g or t, "
        "e.g. 512m or 4g",
    ),
    "driver memory too small": (
        "run",
        {"TRIBUTARY_DRIVER_MEMORY": "256m"},
        "TRIBUTARY_DRIVER_MEMORY='256m' is too small: Spark needs at least 450m; use e.g. 512m or 4g",
    ),
    "master": (
        "run",
        {"TRIBUTARY_SPARK_MASTER": "bogus://x"},
        "TRIBUTARY_SPARK_MASTER='bogus://x' is not a Spark master URL; use local, local[N], local[*], local[N,F], "
        "spark://host:port, yarn or k8s://https://host:port",
    ),
    "shuffle partitions in spark conf": (
        "run",
        {"TRIBUTARY_SPARK_CONF": "spark.sql.shuffle.partitions=-1"},
        "TRIBUTARY_SPARK_CONF key spark.sql.shuffle.partitions must be a positive integer, got '-1'",
    ),
    "bind address": (
        "run",
        {"TRIBUTARY_BIND_ADDRESS": "my laptop"},
        "TRIBUTARY_BIND_ADDRESS='my laptop' is not an IP address or host name; use e.g. 127.0.0.1 (this machine "
        "only) or the address cluster executors reach the driver on",
    ),
}


@pytest.mark.parametrize("case", BAD_SETTINGS, ids=list(BAD_SETTINGS))
def test_bad_setting_is_one_line(tmp_path, case):
    command, settings, message = BAD_SETTINGS[case]
    tmp = tmp_path.resolve()
    (tmp / "afile").write_text("not a folder")
    env = _clean_env(tmp / "home", **{k: v.format(tmp=tmp) for k, v in settings.items()})
    result = _cli(command, env=env, cwd=tmp)
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"tributary: error: {message.format(tmp=tmp)}\n"
    assert result.stdout == ""


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_home_is_one_line(tmp_path):
    tmp = tmp_path.resolve()
    (tmp / "locked").mkdir(mode=0o555)
    result = _cli("run", env=_clean_env(tmp / "locked" / "home"), cwd=tmp)
    assert result.returncode == 2
    assert result.stderr == (
        f"tributary: error: TRIBUTARY_HOME={tmp}/locked/home is not writable (no permission to write in "
        f"{tmp}/locked); set TRIBUTARY_HOME to a folder you can write, e.g. {tmp}/.tributary\n"
    )


def test_spark_conf_rejected_at_start_up_names_the_key(tmp_path):
    """A value only Spark knows is wrong: its start-up failure becomes one line naming the key (Spark logs above)."""
    env = _clean_env(tmp_path, TRIBUTARY_SPARK_CONF="spark.memory.fraction=2", TRIBUTARY_DRIVER_MEMORY="1g")
    result = _cli("run", env=env, cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert (
        "tributary: error: TRIBUTARY_SPARK_CONF key spark.memory.fraction='2' was rejected by Spark at start-up: "
        "spark.memory.fraction should be between 0 and 1 (was '2.0'); fix or remove it"
    ) in result.stderr.splitlines()


# Item 14 of issue 17: with a local master, nothing the JVM listens on is reachable from another machine.
_SESSION_CHILD = """
import json, sys
from infra.settings import Settings
from infra.spark import get_spark
spark = get_spark(Settings.from_env())
sc = spark.sparkContext
ports = {
    "driver": int(sc.getConf().get("spark.driver.port")),
    "block manager": sc._jsc.sc().env().blockManager().blockManagerId().port(),
    "ui": int(sc.uiWebUrl.rsplit(":", 1)[1]),
}
print(json.dumps({"pid": spark._jvm.java.lang.ProcessHandle.current().pid(), "ports": ports}), flush=True)
sys.stdin.readline()
"""


def _proc_address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address from /proc/net/tcp{,6}: 32-bit words in host byte order."""
    raw = bytes.fromhex(hex_address)
    if sys.byteorder == "little":
        raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(raw)


def _listening(pid: int) -> list[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    """(address, port) of every TCP socket process `pid` listens on."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:  # 0A: LISTEN
                address, port = local.split(":")
                found.append((_proc_address(address), int(port, 16)))
    return found


def _readable(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """IPv4-mapped IPv6 addresses (Java's sockets on a dual-stack host) as the IPv4 address they carry."""
    return getattr(address, "ipv4_mapped", None) or address


def _is_loopback(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return _readable(address).is_loopback


@pytest.mark.skipif(not Path("/proc/self/net/tcp").exists(), reason="needs Linux /proc")
def test_local_spark_listens_on_loopback_only(tmp_path):
    env = _clean_env(tmp_path, TRIBUTARY_SPARK_CONF="spark.ui.enabled=true", TRIBUTARY_DRIVER_MEMORY="1g")
    child = subprocess.Popen(
        [sys.executable, "-c", _SESSION_CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=REPO,
    )
    try:
        line = child.stdout.readline()
        assert line, "the SparkSession did not start"
        started = json.loads(line)
        sockets = _listening(started["pid"])
        ports = {port for _, port in sockets}
        for name, port in started["ports"].items():
            assert port in ports, f"the {name} port {port} is not among the JVM's listening sockets {sockets}"
        exposed = [f"{_readable(address)}:{port}" for address, port in sockets if not _is_loopback(address)]
        assert not exposed, f"the JVM listens beyond loopback: {exposed}"
    finally:
        child.stdin.close()
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def test_cluster_master_can_bind_elsewhere(tmp_path, monkeypatch):
    """A non-local master keeps Spark's default address unless TRIBUTARY_BIND_ADDRESS says otherwise."""
    from infra.spark import _listen_conf

    for name in ("TRIBUTARY_SPARK_MASTER", "TRIBUTARY_BIND_ADDRESS", "TRIBUTARY_SPARK_CONF"):
        monkeypatch.delenv(name, raising=False)
    local = Settings.from_env(home=tmp_path)
    assert local.listen_address == "127.0.0.1"
    assert _listen_conf(local) == {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}
    cluster = replace(local, spark_master="spark://10.0.0.1:7077")
    assert cluster.listen_address is None and _listen_conf(cluster) == {}
    everywhere = replace(cluster, bind_address="0.0.0.0")
    assert _listen_conf(everywhere) == {"spark.driver.bindAddress": "0.0.0.0"}
    assert _listen_conf(replace(cluster, bind_address="10.0.0.5")) == {
        "spark.driver.bindAddress": "10.0.0.5",
        "spark.driver.host": "10.0.0.5",
    }
