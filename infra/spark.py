"""The one place that builds the SparkSession and sets Spark configuration."""

from __future__ import annotations

import os
import sys
import threading

from pyspark.sql import SparkSession

from infra.catalog import pyiceberg_catalog, spark_catalog_conf
from infra.jars import spark_jars
from infra.java import require_java
from infra.settings import Settings

_lock = threading.Lock()
_active: tuple[Settings, SparkSession] | None = None


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
        "spark.sql.streaming.metricsEnabled": "true",
        "spark.sql.adaptive.enabled": "true",
        # Tables are named explicitly; nothing should land in a local Hive warehouse.
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

    One JVM per process: asking for a session with different settings stops the old one first.
    """
    global _active
    with _lock:
        if _active is not None:
            active_settings, session = _active
            if active_settings == settings and session._jsc is not None:
                return session
            session.stop()
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
        _active = (settings, session)
        return session


def stop_spark() -> None:
    """Stop the process's SparkSession if one is running."""
    global _active
    with _lock:
        if _active is not None:
            _active[1].stop()
            _active = None
