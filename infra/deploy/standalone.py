"""A Spark standalone master and its workers on 127.0.0.1, started from the pyspark install (`tributary cluster up`).

Each daemon is `$SPARK_HOME/bin/spark-class <Master|Worker>` (SPARK_HOME is the pyspark package folder, which
holds Spark's jars and scripts) in its own process group, bound to 127.0.0.1 (RPC and web UI), with its pid in
`<folder>/pids/<name>.pid`; stopping signals exactly those processes, after checking that each pid is still a
Spark daemon (a pid file outlives its process, and pids are reused).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from infra.errors import SetupError

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# The daemons only schedule; executors get their own heap (TRIBUTARY_EXECUTOR_MEMORY).
DAEMON_MEMORY = "256m"


def spark_home() -> Path:
    """The pyspark package folder: Spark's jars and bin/ scripts."""
    import pyspark

    return Path(pyspark.__file__).parent


def _daemon_env(folder: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",  # the web UIs bind to it (no setting for that)
        "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
        "SPARK_LOG_DIR": str(folder / "logs"),
    }


def _launch(folder: Path, name: str, arguments: list[str]) -> int:
    (folder / "pids").mkdir(parents=True, exist_ok=True)
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    command = [str(spark_home() / "bin" / "spark-class"), *arguments]
    with open(folder / "logs" / f"{name}.log", "ab") as log:
        process = subprocess.Popen(
            command, env=_daemon_env(folder), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    (folder / "pids" / f"{name}.pid").write_text(str(process.pid))
    return process.pid


def start_master(folder: Path, port: int, ui_port: int) -> int:
    """Start the master on spark://127.0.0.1:`port` (web UI on `ui_port`); its pid."""
    return _launch(
        folder, "master", [MASTER_CLASS, "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port)]
    )


def start_worker(folder: Path, index: int, master: str, cores: int, memory: str, ui_port: int) -> int:
    """Start worker `index` offering `cores` and `memory` to `master`; its pid."""
    work = folder / f"worker-{index}"
    work.mkdir(parents=True, exist_ok=True)
    arguments = [WORKER_CLASS, "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory]
    arguments += ["--webui-port", str(ui_port), "--work-dir", str(work), master]
    return _launch(folder, f"worker-{index}", arguments)


def master_state(ui_port: int) -> dict | None:
    """The master's status JSON (workers, applications), None when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as response:
            return json.loads(response.read())
    except (OSError, ValueError):
        return None


def wait_for_workers(folder: Path, ui_port: int, workers: int, timeout: float) -> dict:
    """Wait until the master reports `workers` alive workers; SetupError naming a daemon that exited (with the last
    line of its log) or, after `timeout` s, the logs."""
    deadline = time.monotonic() + timeout
    while True:
        state = master_state(ui_port)
        if state is not None and state.get("aliveworkers", 0) >= workers:
            return state
        dead = [name for name in daemon_names(folder) if not _running(folder, name)]
        if dead:
            said = _last_line(folder / "logs" / f"{dead[0]}.log")
            raise SetupError(f"the Spark cluster did not come up: {dead[0]} exited ({said}); see {folder / 'logs'}")
        if time.monotonic() > deadline:
            raise SetupError(
                f"the Spark cluster did not come up: not all {workers} workers registered in {timeout:g} s; "
                f"see {folder / 'logs'}"
            )
        time.sleep(0.5)


def _last_line(log: Path) -> str:
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return lines[-1][:300] if lines else "an empty log"


def process_running(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie, exited but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _running(folder: Path, name: str) -> bool:
    """Whether the process in `name`'s pid file still runs."""
    try:
        return process_running(int((folder / "pids" / f"{name}.pid").read_text()))
    except (OSError, ValueError):
        return False


def daemon_names(folder: Path) -> list[str]:
    """The daemons started from `folder` (by their pid files)."""
    return sorted(path.stem for path in (folder / "pids").glob("*.pid"))


def _spark_pid(folder: Path, name: str) -> int | None:
    """The pid in `name`'s pid file if that process is still a Spark daemon (not a reused pid)."""
    if not _running(folder, name):
        return None
    try:
        pid = int((folder / "pids" / f"{name}.pid").read_text())
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    # Empty for an instant while spark-class replaces itself with the JVM (exec), which is still the daemon.
    return pid if not command or b"org.apache.spark.deploy." in command else None


def stop_all(folder: Path, timeout: float = 20) -> list[str]:
    """Stop every daemon started from `folder` (workers first), then remove the pid files; the names stopped."""
    stopped = []
    for name in sorted(daemon_names(folder), key=lambda n: n == "master"):
        pid = _spark_pid(folder, name)
        if pid is not None:
            _stop_group(pid, timeout)
            stopped.append(name)
        (folder / "pids" / f"{name}.pid").unlink(missing_ok=True)
    return stopped


def _stop_group(pid: int, timeout: float) -> None:
    """SIGTERM the daemon's process group (it and the executors it launched), SIGKILL what is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        _reap(pid)
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    _reap(pid)


def _reap(pid: int) -> None:
    """Collect the exit status when this process started the daemon (else it lingers as a zombie)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
