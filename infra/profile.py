"""The deployment profile: the embedded laptop default, or a cluster reached by settings only (docs/deploy.md).

- `TRIBUTARY_PROFILE`: `local` (default: local Spark, SQLite catalog, Dagster in SQLite files) or `cluster` (a Spark
  master, a PostgreSQL catalog and a PostgreSQL-backed Dagster instance; each is checked, none is assumed).
- `TRIBUTARY_EXECUTOR_MEMORY`, `TRIBUTARY_EXECUTOR_CORES`, `TRIBUTARY_MAX_CORES`: each executor's heap and cores,
  and the cores one run may take from the cluster (`spark.executor.memory`, `spark.executor.cores`,
  `spark.cores.max`); unset, Spark's defaults.
- `TRIBUTARY_EXECUTOR_WAIT`: seconds a run waits for the cluster to run its first task before it stops with one
  line (default: `TRIBUTARY_LOCK_WAIT`, at least 30 s: executors held by another run are waited for like its
  table locks).
- `TRIBUTARY_SHARED_STORAGE`: `true` when the warehouse, landing and checkpoint folders are on storage every
  executor host mounts at the same path (NFS, a cluster file system). A master on another host is refused with
  folders on this machine unless it is set: executors would write where no one else reads.
- `TRIBUTARY_DAGSTER_STORAGE_URL`: the PostgreSQL database of the cluster's Dagster instance
  (`postgresql+psycopg2://user:password@host:5432/dagster`); never printed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from infra.errors import ConfigError

PROFILES = ("local", "cluster")
_LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
_TRUE, _FALSE = {"1", "true", "yes"}, {"0", "false", "no", ""}
DAGSTER_SCHEME = "postgresql+psycopg2://"
_URL = re.compile(r"[a-z0-9+]+://\S+")


def master_hosts(master: str) -> list[str]:
    """The hosts of a `spark://h1:p1,h2:p2` master URL ([] for local, YARN and Kubernetes masters)."""
    if not master.startswith("spark://"):
        return []
    return [entry.rsplit(":", 1)[0] for entry in master[len("spark://") :].split(",")]


def loopback_master(master: str) -> bool:
    """True for a standalone master on this machine's loopback address: its workers can only be on this machine."""
    hosts = master_hosts(master)
    return bool(hosts) and all(host in _LOOPBACK_HOSTS for host in hosts)


@dataclass(frozen=True)
class Deployment:
    """How Tributary is deployed: the profile and the executor settings of a cluster."""

    profile: str = "local"
    # Checked by `Settings.validate` with the rules of the other Spark sizes.
    executor_memory: str | None = None
    executor_cores: str | None = None
    max_cores: str | None = None
    shared_storage: bool = False
    # None: the table-lock wait, at least `infra.executors.MIN_WAIT_SECONDS`.
    executor_wait_seconds: int | None = None
    dagster_storage_url: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Deployment:
        """Read the variables above; raise ConfigError naming a bad one."""
        env = os.environ if environ is None else environ
        profile = env.get("TRIBUTARY_PROFILE") or "local"
        if profile not in PROFILES:
            raise ConfigError(f"TRIBUTARY_PROFILE={profile!r} is not a profile; choose one of {PROFILES}")
        shared = (env.get("TRIBUTARY_SHARED_STORAGE") or "").strip().lower()
        if shared not in _TRUE | _FALSE:
            raise ConfigError(f"TRIBUTARY_SHARED_STORAGE={shared!r} must be true or false")
        url = env.get("TRIBUTARY_DAGSTER_STORAGE_URL") or None
        if url is not None and not url.startswith(DAGSTER_SCHEME):
            scheme = url.split("://", 1)[0] if _URL.fullmatch(url) else "no scheme"
            raise ConfigError(
                f"TRIBUTARY_DAGSTER_STORAGE_URL starts with {scheme!r}; write it as {DAGSTER_SCHEME}user:password@"
                "host:5432/dagster (plain postgresql:// asks SQLAlchemy for psycopg 3, which is not installed)"
            )
        wait = env.get("TRIBUTARY_EXECUTOR_WAIT") or None
        if wait is not None and not (wait.isascii() and wait.isdigit() and int(wait) > 0):
            raise ConfigError(f"TRIBUTARY_EXECUTOR_WAIT must be a whole number of seconds (1 or more), got {wait!r}")
        return cls(
            profile=profile,
            executor_memory=env.get("TRIBUTARY_EXECUTOR_MEMORY") or None,
            executor_cores=env.get("TRIBUTARY_EXECUTOR_CORES") or None,
            max_cores=env.get("TRIBUTARY_MAX_CORES") or None,
            shared_storage=shared in _TRUE,
            executor_wait_seconds=int(wait) if wait is not None else None,
            dagster_storage_url=url,
        )

    @property
    def cluster(self) -> bool:
        """True for the cluster profile."""
        return self.profile == "cluster"

    def require_dagster_storage(self) -> None:
        """Raise ConfigError unless the cluster's Dagster database is set."""
        if self.dagster_storage_url is None:
            raise ConfigError(
                "TRIBUTARY_PROFILE=cluster keeps Dagster's runs in PostgreSQL: set TRIBUTARY_DAGSTER_STORAGE_URL="
                f"{DAGSTER_SCHEME}user:password@host:5432/dagster (`tributary cluster up` writes it to its env file)"
            )

    def spark_conf(self) -> dict[str, str]:
        """The Spark keys these settings decide (only those that are set)."""
        conf = {
            "spark.executor.memory": self.executor_memory,
            "spark.executor.cores": self.executor_cores,
            "spark.cores.max": self.max_cores,
        }
        return {key: value for key, value in conf.items() if value is not None}

    def check(self, master: str, uses_sqlite: bool, folders: Mapping[str, Path]) -> None:
        """Refuse what cannot work where Spark runs: `folders` maps each path setting's variable to its folder."""
        if self.cluster and master.startswith("local"):
            raise ConfigError(
                f"TRIBUTARY_PROFILE=cluster runs on a Spark cluster, but TRIBUTARY_SPARK_MASTER={master!r}; set it "
                "to the master, e.g. spark://host:7077 (`tributary cluster up` starts one on this machine)"
            )
        if self.cluster and uses_sqlite:
            raise ConfigError(
                "TRIBUTARY_PROFILE=cluster needs a catalog every writer can reach, and SQLite allows one writer on "
                "one machine: set TRIBUTARY_CATALOG_URI=jdbc:postgresql://host:5432/db?user=...&password=... and "
                "TRIBUTARY_CATALOG_SQLALCHEMY_URI=postgresql+psycopg2://user:password@host:5432/db (docs/deploy.md)"
            )
        remote = not master.startswith("local") and not loopback_master(master)
        if remote and not self.shared_storage:
            variable, folder = next(iter(folders.items()))
            raise ConfigError(
                f"{variable}={folder} is a folder on this machine, but the executors of {master} may run on other "
                "machines, which would write and read their own copies: put the warehouse, landing and checkpoint "
                "folders on storage every host mounts at the same path and set TRIBUTARY_SHARED_STORAGE=true "
                "(docs/deploy.md)"
            )
