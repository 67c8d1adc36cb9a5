"""Dagster resources built on `infra`: the settings and the process's SparkSession."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from dagster_pyspark import LazyPySparkResource
from pyspark import SparkContext
from pyspark.sql import SparkSession

from infra.errors import ConfigError
from infra.settings import Settings, spark_conf_label
from infra.spark import get_spark


class SparkResource(LazyPySparkResource):
    """dagster-pyspark's lazy PySpark resource, configured from Tributary's settings: `spark_session` is the one
    SparkSession of the run's process (built on first use, so a step with nothing to do starts no JVM), the same
    session every table of the run and a user's own assets share.

    `spark_config` adds Spark settings to Tributary's own, as `TRIBUTARY_SPARK_CONF` does (and checked as it is);
    `home` and `catalog_name` override `TRIBUTARY_HOME` and `TRIBUTARY_CATALOG_NAME`.
    """

    spark_config: dict[str, Any] = {}
    home: str | None = None
    catalog_name: str | None = None

    def settings(self) -> Settings:
        """Settings from `TRIBUTARY_*` variables, with this resource's overrides."""
        settings = Settings.from_env(home=self.home)
        if self.home:
            settings = settings.with_home(Path(self.home))
        if self.catalog_name:
            settings = replace(settings, catalog_name=self.catalog_name)
        if self.spark_config:
            given = {**dict(settings.spark_conf), **{k: str(v) for k, v in self.spark_config.items()}}
            settings = replace(settings, spark_conf=tuple(sorted(given.items())))
            try:
                settings.validate()
            except ConfigError as exc:
                message = str(exc)
                for key in self.spark_config:
                    message = message.replace(spark_conf_label(key), f"the Dagster resource's spark_config key {key}")
                raise ConfigError(message) from None
        return settings

    @property
    def spark_session(self) -> SparkSession:
        """The SparkSession for these settings (built on first use)."""
        return get_spark(self.settings())

    @property
    def spark_context(self) -> SparkContext:
        """The SparkContext of `spark_session`."""
        return self.spark_session.sparkContext

    def session(self) -> SparkSession:
        """The same as `spark_session`."""
        return self.spark_session
