"""The one place that builds the SparkSession and sets Spark configuration."""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from infra.catalog import pyiceberg_catalog, spark_catalog_conf
from infra.jars import spark_jars
from infra.java import require_java
from infra.settings import Settings

_lock = threading.Lock()


@dataclass
class _Active:
    engine: tuple
    session: SparkSession
    catalogs: dict[str, dict[str, str]] = field(default_factory=dict)


_active: _Active | None = None


def _engine(settings: Settings) -> tuple:
    """The settings that need a new JVM when they change; catalogs can be added to a running session."""
    return (
        settings.spark_master,
        settings.driver_memory,
        settings.shuffle_partitions,
        settings.spark_conf,
        settings.jar_cache,
        settings.uses_sqlite,
    )


def spark_conf(settings: Settings) -> dict[str, str]:
    """Every Spark setting Tributary uses for `settings` (also used to launch the SQL server)."""
    jars = spark_jars(settings)
    conf = {
        "spark.master": settings.spark_master,
        "spark.app.name": "tributary",
        "spark.jars": ",".join(str(j) for j in jars.jars),
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": settings.driver_memory,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.numRecentProgressUpdates": "1000",
        "spark.sql.adaptive.enabled": "true",
        # Tables are always catalog-qualified; nothing should land in a local Hive warehouse.
        "spark.sql.warehouse.dir": str(settings.home / "spark-warehouse"),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={settings.home / 'derby'}",
    }
    if jars.native_lib_dir:
        conf["spark.driver.extraLibraryPath"] = str(jars.native_lib_dir)
        conf["spark.executor.extraLibraryPath"] = str(jars.native_lib_dir)
    conf.update(spark_catalog_conf(settings))
    conf.update(dict(settings.spark_conf))
    return conf


def get_spark(settings: Settings) -> SparkSession:
    """Return the process's SparkSession for `settings`, building it on first use.

    One JVM per process. Settings that differ only in their catalog (another catalog name, database and
    warehouse) register that catalog on the running session; anything else restarts the session.
    """
    global _active
    with _lock:
        catalog = spark_catalog_conf(settings)
        if _active is not None:
            alive = _active.session._jsc is not None
            known = _active.catalogs.get(settings.catalog_name)
            if alive and _active.engine == _engine(settings) and known in (None, catalog):
                if known is None:
                    pyiceberg_catalog(settings)
                    for key, value in catalog.items():
                        if key != "spark.sql.defaultCatalog":
                            _active.session.conf.set(key, value)
                    _active.catalogs[settings.catalog_name] = catalog
                return _active.session
            _active.session.stop()
            _active = None
        require_java()
        # Python workers must run the interpreter that has pandas/pyarrow, not the system python3.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        pyiceberg_catalog(settings)  # creates the catalog tables before Spark connects
        settings.home.mkdir(parents=True, exist_ok=True)
        builder = SparkSession.builder
        for key, value in spark_conf(settings).items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        _active = _Active(_engine(settings), session, {settings.catalog_name: catalog})
        return session


def stop_spark() -> None:
    """Stop the process's SparkSession if one is running."""
    global _active
    with _lock:
        if _active is not None:
            _active.session.stop()
            _active = None
