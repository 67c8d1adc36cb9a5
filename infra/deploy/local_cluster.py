"""The one-host cluster: a Spark standalone master, its workers and a PostgreSQL server, all on 127.0.0.1.

`tributary cluster up` (`make cluster-up`) starts them from what set-up installed, waits until the workers have
registered and the databases exist, and writes `<folder>/env`: the settings of the cluster profile, to
`source` before `make demo`, `make ui` or `tributary run`. `tributary cluster down` stops exactly what `up`
started (pid files, PostgreSQL's own). What is started is recorded in `<folder>/cluster.json`.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path

from infra.deploy import postgres, standalone
from infra.ports import port_or_free

DEFAULT_PORTS = {"master": 7077, "master_ui": 8080, "postgres": 5433}


@dataclass(frozen=True)
class Cluster:
    """What `up` started: ports on 127.0.0.1 and the PostgreSQL password."""

    folder: Path
    master_port: int
    master_ui: int
    worker_uis: tuple[int, ...]
    postgres_port: int
    password: str = field(repr=False)

    @property
    def master(self) -> str:
        """The master URL."""
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def postgres(self) -> postgres.Postgres:
        """How to reach the PostgreSQL server."""
        return postgres.Postgres(self.postgres_port, self.password)

    def env(self) -> dict[str, str]:
        """The settings that point Tributary at this cluster (the cluster profile)."""
        server = self.postgres
        return {
            "TRIBUTARY_PROFILE": "cluster",
            "TRIBUTARY_SPARK_MASTER": self.master,
            "TRIBUTARY_CATALOG_URI": server.jdbc("tributary"),
            "TRIBUTARY_CATALOG_SQLALCHEMY_URI": server.url("tributary"),
            "TRIBUTARY_DAGSTER_STORAGE_URL": server.url("dagster"),
        }


def _state_file(folder: Path) -> Path:
    return folder / "cluster.json"


def load(folder: Path) -> Cluster | None:
    """The cluster recorded in `folder`, None when none was started there."""
    try:
        data = json.loads(_state_file(folder).read_text())
    except (OSError, ValueError):
        return None
    return Cluster(folder=folder, **{**data, "worker_uis": tuple(data["worker_uis"])})


def up(
    folder: Path,
    workers: int = 2,
    cores: int = 1,
    memory: str = "1500m",
    ports: dict[str, int] | None = None,
    timeout: float = 120,
) -> Cluster:
    """Start PostgreSQL, the master and `workers` workers (`cores` and `memory` each); stop everything that was
    started if any part fails. Ports: `ports` (or the usual ones), a free one where that is taken."""
    folder = folder.resolve()
    running = load(folder)
    if running is not None and standalone.daemon_names(folder):
        return running
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o711)  # PostgreSQL's user must reach its data folder inside; nothing here is listed to others
    wanted = {**DEFAULT_PORTS, **(ports or {})}
    try:
        pg_port = port_or_free(wanted["postgres"])
        password = postgres.start(folder, pg_port).password
        master_port, master_ui = port_or_free(wanted["master"]), port_or_free(wanted["master_ui"])
        standalone.start_master(folder, master_port, master_ui)
        cluster = Cluster(folder, master_port, master_ui, (), pg_port, password)
        uis = []
        for index in range(workers):
            uis.append(port_or_free(master_ui + 1 + index))
            standalone.start_worker(folder, index, cluster.master, cores, memory, uis[-1])
        cluster = Cluster(folder, master_port, master_ui, tuple(uis), pg_port, password)
        _state_file(folder).write_text(json.dumps({k: v for k, v in asdict(cluster).items() if k != "folder"}))
        _state_file(folder).chmod(0o600)
        standalone.wait_for_workers(folder, master_ui, workers, timeout)
    except BaseException:
        down(folder)
        raise
    write_env(cluster)
    return cluster


def write_env(cluster: Cluster) -> Path:
    """`<folder>/env`: `export` lines of the cluster profile's settings (holds the password: owner only)."""
    path = cluster.folder / "env"
    path.touch(mode=0o600)
    path.write_text("".join(f"export {key}={shlex.quote(value)}\n" for key, value in cluster.env().items()))
    return path


def down(folder: Path) -> list[str]:
    """Stop the Spark daemons and PostgreSQL started from `folder`; what was stopped."""
    folder = folder.resolve()
    stopped = standalone.stop_all(folder)
    if postgres.stop(folder):
        stopped.append("postgres")
    _state_file(folder).unlink(missing_ok=True)
    return stopped
