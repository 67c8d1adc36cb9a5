"""One `Settings` object for the whole platform, read from `TRIBUTARY_*` environment variables.

Every path defaults to a folder under `TRIBUTARY_HOME` (default `./.tributary`), which is the embedded,
laptop-sized deployment: local Spark, a SQLite-backed Iceberg catalog, files on local disk. A cluster
deployment changes settings only (`TRIBUTARY_SPARK_MASTER`, `TRIBUTARY_CATALOG_URI`, `TRIBUTARY_WAREHOUSE`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path

from infra.errors import ConfigError

TABLE_FORMATS = ("iceberg", "delta")
PREFIX = "TRIBUTARY_"


def _env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(PREFIX + name)
    return value if value not in (None, "") else default


def _positive_int(name: str, default: str) -> int:
    value = _env(name, default)
    if not value.isdigit() or int(value) < 1:
        raise ConfigError(f"{PREFIX}{name} must be a positive integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Settings:
    """Where data lives and how Spark and the catalog are reached."""

    home: Path
    landing: Path
    warehouse: Path
    checkpoints: Path
    catalog_db: Path
    catalog_uri: str | None = None
    catalog_name: str = "tributary"
    table_format: str = "iceberg"
    spark_master: str = "local[*]"
    shuffle_partitions: int = 4
    driver_memory: str = "4g"
    jar_cache: Path = field(default_factory=lambda: Path.home() / ".cache" / "tributary" / "jars")
    spark_conf: tuple[tuple[str, str], ...] = ()
    # Orchestration (see docs/operations.md): pipeline schedule, sensor interval, first daily partition, alerts.
    pipeline_cron: str = "0 * * * *"
    sensor_interval_seconds: int = 30
    partitions_start: str = "2026-01-01"
    alert_webhook: str | None = None

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
        shuffle = _env("SHUFFLE_PARTITIONS", "4")
        if not shuffle.isdigit() or int(shuffle) < 1:
            raise ConfigError(f"TRIBUTARY_SHUFFLE_PARTITIONS must be a positive integer, got {shuffle!r}")
        settings = cls(
            home=root,
            landing=Path(_env("LANDING", str(root / "landing"))).expanduser().resolve(),
            warehouse=Path(_env("WAREHOUSE", str(root / "warehouse"))).expanduser().resolve(),
            checkpoints=Path(_env("CHECKPOINTS", str(root / "checkpoints"))).expanduser().resolve(),
            catalog_db=Path(_env("CATALOG_DB", str(root / "catalog.db"))).expanduser().resolve(),
            catalog_uri=_env("CATALOG_URI"),
            catalog_name=_env("CATALOG_NAME", "tributary"),
            table_format=_env("TABLE_FORMAT", "iceberg"),
            spark_master=_env("SPARK_MASTER", "local[*]"),
            shuffle_partitions=int(shuffle),
            driver_memory=_env("DRIVER_MEMORY", "4g"),
            jar_cache=Path(_env("JAR_CACHE", str(Path.home() / ".cache" / "tributary" / "jars"))).expanduser(),
            spark_conf=tuple(sorted(extra.items())),
            pipeline_cron=_env("PIPELINE_CRON", "0 * * * *"),
            sensor_interval_seconds=_positive_int("SENSOR_INTERVAL", "30"),
            partitions_start=_env("PARTITIONS_START", "2026-01-01"),
            alert_webhook=_env("ALERT_WEBHOOK"),
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
            date.fromisoformat(self.partitions_start)
        except ValueError:
            raise ConfigError(
                f"TRIBUTARY_PARTITIONS_START={self.partitions_start!r} is not a date (expected YYYY-MM-DD)"
            ) from None
        if not self.catalog_name.isidentifier() or not self.catalog_name.islower():
            raise ConfigError(f"TRIBUTARY_CATALOG_NAME={self.catalog_name!r} must be a lower-case identifier")

    def with_home(self, home: Path) -> Settings:
        """The same settings rooted at another home folder (used by tests and benchmarks)."""
        return replace(
            self,
            home=home,
            landing=home / "landing",
            warehouse=home / "warehouse",
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

    def checkpoint_for(self, table: str) -> Path:
        """The checkpoint folder owned by exactly one table."""
        return self.checkpoints / table.replace(".", "/")
