"""One `Settings` object for the whole platform, read from `TRIBUTARY_*` environment variables.

Every path defaults to a folder under `TRIBUTARY_HOME` (default `./.tributary`), which is the embedded,
laptop-sized deployment: local Spark, a SQLite-backed Iceberg catalog, files on local disk. A cluster
deployment changes settings only (`TRIBUTARY_SPARK_MASTER`, `TRIBUTARY_CATALOG_URI`, `TRIBUTARY_WAREHOUSE`,
`TRIBUTARY_BIND_ADDRESS`).

Every value is checked here, before any JVM starts, and a bad one raises `ConfigError` naming the variable and
the fix; `Settings.require_writable` checks the folders a command will write.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path

from infra.errors import ConfigError
from infra.home_record import recorded_format
from infra.kafka import KafkaSettings
from infra.object_store import ObjectStore, refuse_bucket_format, refuse_object_url, warehouse_bucket
from infra.profile import Deployment, loopback_master
from infra.scratch import default_root
from infra.setting_checks import SPARK_KEYS, check_address, check_master, check_memory, require_positive_int
from infra.writable import writable_problem, writable_suggestion

TABLE_FORMATS = ("iceberg", "delta")
PREFIX = "TRIBUTARY_"


def _env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(PREFIX + name)
    return value if value not in (None, "") else default


def _non_negative_int(name: str, default: str, unit: str) -> int:
    """The setting as a whole number of `unit` (0 or more), or `ConfigError` naming it and its unit."""
    value = _env(name, default)
    if not (value.isascii() and value.isdigit()):
        raise ConfigError(f"{PREFIX}{name} must be a whole number of {unit} (0 or more), got {value!r}")
    return int(value)


def _positive_int(name: str, default: str) -> int:
    return require_positive_int(PREFIX + name, _env(name, default))


LOOPBACK = "127.0.0.1"


def spark_conf_label(key: str) -> str:
    """How messages name Spark setting `key` given in `TRIBUTARY_SPARK_CONF`."""
    return f"TRIBUTARY_SPARK_CONF key {key}"


def dataset_modules_setting() -> tuple[str, ...]:
    """Python modules holding datasets outside `pipelines/datasets/` (`TRIBUTARY_DATASETS`, comma-separated)."""
    raw = _env("DATASETS") or ""
    names = tuple(n.strip() for n in raw.split(",") if n.strip())
    for name in names:
        if not all(part.isidentifier() for part in name.split(".")):
            raise ConfigError(
                f"TRIBUTARY_DATASETS item {name!r} is not a Python module name (expected e.g. 'acme.datasets.sales')"
            )
    return names


@dataclass(frozen=True)
class Settings:
    """Where data lives and how Spark and the catalog are reached."""

    home: Path
    landing: Path
    # The local warehouse folder; unused when `warehouse_url` puts the tables in a bucket.
    warehouse: Path
    checkpoints: Path
    catalog_db: Path
    # `TRIBUTARY_WAREHOUSE=s3a://bucket/prefix`: the tables on object storage (infra/object_store.py).
    warehouse_url: str | None = None
    # May carry the database's password (jdbc:postgresql://...&password=...): kept out of every repr.
    catalog_uri: str | None = field(default=None, repr=False)
    catalog_name: str = "tributary"
    table_format: str = "iceberg"
    spark_master: str = "local[*]"
    shuffle_partitions: int = 4
    driver_memory: str = "4g"
    jar_cache: Path = field(default_factory=lambda: Path.home() / ".cache" / "tributary" / "jars")
    # Each JVM's temp files, in a folder of its own, swept once its process has ended (infra/scratch.py).
    scratch: Path = field(default_factory=default_root)
    spark_conf: tuple[tuple[str, str], ...] = ()
    # Address the driver's ports listen on; None: 127.0.0.1 for a local master, Spark's default otherwise.
    bind_address: str | None = None
    # Orchestration (see docs/operations.md): pipeline schedule, sensor interval, first daily partition, alerts.
    pipeline_cron: str = "0 * * * *"
    sensor_interval_seconds: int = 5
    # None: the home's first data day (infra.home_record.first_day), today before any data.
    partitions_start: str | None = None
    alert_webhook: str | None = None
    # How long a run waits for another writer of the same table before failing (pipelines/run/locks.py).
    lock_wait_seconds: int = 900
    # Landing batches of at least this many MB (0: all) are staged, audited, published (sources/file_health.py).
    stage_landing_mb: int = 0
    # Kafka brokers and client settings (infra/kafka.py).
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    # The profile (local or cluster) and a cluster's executor settings (infra/profile.py).
    deployment: Deployment = field(default_factory=Deployment)
    # The S3-compatible store of a warehouse in a bucket (`TRIBUTARY_S3_*`; credentials kept out of every repr).
    object_store: ObjectStore = field(default_factory=ObjectStore)

    @classmethod
    def from_env(cls, home: Path | str | None = None) -> Settings:
        """Build settings from `TRIBUTARY_*` variables; `home` overrides `TRIBUTARY_HOME`."""
        root = Path(home or _env("HOME", ".tributary")).expanduser().resolve()
        extra: dict[str, str] = {}
        raw_conf = _env("SPARK_CONF")
        if raw_conf:
            for item in raw_conf.split(","):
                key, sep, value = item.partition("=")
                if not sep or not key.strip():
                    raise ConfigError(
                        f"TRIBUTARY_SPARK_CONF item {item!r} is not key=value "
                        "(expected e.g. 'spark.executor.memory=4g,spark.sql.shuffle.partitions=8')"
                    )
                extra[key.strip()] = value.strip()
        for name in ("LANDING", "CHECKPOINTS", "CATALOG_DB", "SCRATCH"):
            refuse_object_url(PREFIX + name, _env(name))
        warehouse = _env("WAREHOUSE", str(root / "warehouse"))
        warehouse_url = warehouse_bucket(PREFIX + "WAREHOUSE", warehouse)
        folder = root / "warehouse" if warehouse_url else Path(warehouse.removeprefix("file://"))
        settings = cls(
            home=root,
            landing=Path(_env("LANDING", str(root / "landing"))).expanduser().resolve(),
            warehouse=folder.expanduser().resolve(),
            warehouse_url=warehouse_url,
            checkpoints=Path(_env("CHECKPOINTS", str(root / "checkpoints"))).expanduser().resolve(),
            catalog_db=Path(_env("CATALOG_DB", str(root / "catalog.db"))).expanduser().resolve(),
            catalog_uri=_env("CATALOG_URI"),
            catalog_name=_env("CATALOG_NAME", "tributary"),
            table_format=_env("TABLE_FORMAT") or recorded_format(root) or "iceberg",
            spark_master=_env("SPARK_MASTER", "local[*]"),
            shuffle_partitions=_positive_int("SHUFFLE_PARTITIONS", "4"),
            driver_memory=_env("DRIVER_MEMORY", "4g"),
            jar_cache=Path(_env("JAR_CACHE", str(Path.home() / ".cache" / "tributary" / "jars"))).expanduser(),
            scratch=Path(_env("SCRATCH") or default_root()).expanduser().resolve(),
            spark_conf=tuple(sorted(extra.items())),
            bind_address=_env("BIND_ADDRESS"),
            pipeline_cron=_env("PIPELINE_CRON", "0 * * * *"),
            sensor_interval_seconds=_positive_int("SENSOR_INTERVAL", "5"),
            partitions_start=_env("PARTITIONS_START"),
            alert_webhook=_env("ALERT_WEBHOOK"),
            lock_wait_seconds=_non_negative_int("LOCK_WAIT", "900", "seconds"),
            stage_landing_mb=_non_negative_int("STAGE_LANDING_MB", "0", "megabytes"),
            kafka=KafkaSettings.from_env(),
            deployment=Deployment.from_env(),
            object_store=ObjectStore.from_env(),
        )
        settings.validate()
        return settings

    def validate(self) -> None:
        """Raise `ConfigError` naming the setting at fault."""
        if self.table_format not in TABLE_FORMATS:
            raise ConfigError(
                f"TRIBUTARY_TABLE_FORMAT={self.table_format!r} is not supported; choose one of {TABLE_FORMATS}"
            )
        try:
            if self.partitions_start is not None:
                date.fromisoformat(self.partitions_start)
        except ValueError:
            raise ConfigError(
                f"TRIBUTARY_PARTITIONS_START={self.partitions_start!r} is not a date (expected YYYY-MM-DD)"
            ) from None
        if not self.catalog_name.isidentifier() or not self.catalog_name.islower():
            raise ConfigError(f"TRIBUTARY_CATALOG_NAME={self.catalog_name!r} must be a lower-case identifier")
        if self.catalog_name == "delta":  # infra.catalog.DELTA_CATALOG: the Spark catalog of the Delta tables
            raise ConfigError("TRIBUTARY_CATALOG_NAME='delta' is the Delta tables' Spark catalog: choose another name")
        check_master("TRIBUTARY_SPARK_MASTER", self.spark_master)
        check_memory("TRIBUTARY_DRIVER_MEMORY", self.driver_memory)
        require_positive_int("TRIBUTARY_SHUFFLE_PARTITIONS", str(self.shuffle_partitions))
        if self.bind_address is not None:
            check_address("TRIBUTARY_BIND_ADDRESS", self.bind_address)
        for key, label, value in self.spark_sources():
            if key in SPARK_KEYS:
                SPARK_KEYS[key][1](label, value)
        refuse_bucket_format(self.warehouse_url, self.table_format)
        folders = {} if self.warehouse_url else {"TRIBUTARY_WAREHOUSE": self.warehouse}
        folders |= {"TRIBUTARY_LANDING": self.landing, "TRIBUTARY_CHECKPOINTS": self.checkpoints}
        self.deployment.check(self.master, self.uses_sqlite, folders)

    def require_writable(self, *names: str) -> None:
        """Raise `ConfigError` unless the folders `names` (e.g. "home", "checkpoints") can be created and written.

        Each name is a path attribute (for `catalog_db`, the database's folder); the message names the variable,
        the path and a path that would work. Nothing is created.
        """
        for name in names:
            if name == "warehouse" and self.warehouse_url is not None:
                continue  # a bucket: reached when the catalog opens (`ObjectStore.require_bucket`)
            path: Path = getattr(self, name)
            is_file = name == "catalog_db"
            folder = path.parent if is_file else path
            problem = writable_problem(folder)
            if problem is not None:
                setting = PREFIX + name.upper()
                raise ConfigError(
                    f"{setting}={path} is not writable ({problem}); set {setting} to a "
                    f"{'file' if is_file else 'folder'} you can write, e.g. {writable_suggestion(name, folder)}"
                )

    def require_platform_writable(self) -> None:
        """`require_writable` for everything a pipeline run writes: home, warehouse, checkpoints, catalog database."""
        sqlite = ("catalog_db",) if self.uses_sqlite else ()
        self.require_writable("home", "warehouse", "checkpoints", *sqlite, "scratch")

    def spark_sources(self) -> list[tuple[str, str, str]]:
        """(Spark key, the setting that decides it, its value) for every Spark key the user controls.

        `TRIBUTARY_SPARK_CONF` entries first, then Tributary's own variables for the keys they did not override.
        """
        sources = [(key, spark_conf_label(key), value) for key, value in self.spark_conf]
        given = dict(self.spark_conf)
        own = {
            "spark.master": self.spark_master,
            "spark.driver.memory": self.driver_memory,
            "spark.sql.shuffle.partitions": str(self.shuffle_partitions),
            "spark.driver.bindAddress": self.listen_address,
            **self.deployment.spark_conf(),
        }
        for key, value in own.items():
            if key not in given and value is not None:
                sources.append((key, SPARK_KEYS[key][0], value))
        return sources

    @property
    def master(self) -> str:
        """The Spark master in effect (`TRIBUTARY_SPARK_CONF`'s spark.master wins over `TRIBUTARY_SPARK_MASTER`)."""
        return dict(self.spark_conf).get("spark.master", self.spark_master)

    @property
    def local_master(self) -> bool:
        """True when Spark runs on this machine only (`local...` masters)."""
        return self.master.startswith("local")

    @property
    def listen_address(self) -> str | None:
        """Where the driver, block manager and UI listen: `TRIBUTARY_BIND_ADDRESS`, else loopback when every
        executor is on this machine (a local master, or a standalone master on 127.0.0.1)."""
        if self.bind_address is not None:
            return self.bind_address
        return LOOPBACK if self.local_master or loopback_master(self.master) else None

    def with_home(self, home: Path) -> Settings:
        """The same settings rooted at another home folder, every folder (the warehouse too) under it (for tests)."""
        return replace(
            self,
            home=home,
            landing=home / "landing",
            warehouse=home / "warehouse",
            warehouse_url=None,
            checkpoints=home / "checkpoints",
            catalog_db=home / "catalog.db",
        )

    @property
    def jdbc_catalog_uri(self) -> str:
        """JDBC URI of the Iceberg catalog (SQLite in WAL mode unless `TRIBUTARY_CATALOG_URI` is set)."""
        if self.catalog_uri:
            return self.catalog_uri
        return f"jdbc:sqlite:{self.catalog_db}?journal_mode=WAL&busy_timeout=30000"

    @property
    def uses_sqlite(self) -> bool:
        """True for the embedded SQLite catalog."""
        return self.jdbc_catalog_uri.startswith("jdbc:sqlite:")

    @property
    def warehouse_uri(self) -> str:
        """The warehouse as the catalogs take it: `s3a://bucket/prefix`, or the local folder's `file:` URI."""
        return self.warehouse_url or self.warehouse.as_uri()

    @property
    def delta_warehouse(self) -> Path:
        """The folder of the Delta tables: `<warehouse>/delta/<namespace>/<table>` (`infra.sql.delta_tables`)."""
        return self.warehouse / "delta"

    def checkpoint_for(self, table: str) -> Path:
        """The checkpoint folder owned by exactly one table."""
        return self.checkpoints / table.replace(".", "/")
