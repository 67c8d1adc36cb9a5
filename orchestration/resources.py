"""Dagster resources built on `infra`: the settings and the process's SparkSession."""

from __future__ import annotations

from dagster import ConfigurableResource
from pyspark.sql import SparkSession

from infra.settings import Settings
from infra.spark import get_spark


class SparkResource(ConfigurableResource):
    """Gives assets the platform settings and the one SparkSession of the run's process."""

    home: str | None = None

    def settings(self) -> Settings:
        """Settings from `TRIBUTARY_*` variables (with `home` overriding `TRIBUTARY_HOME`)."""
        return Settings.from_env(home=self.home)

    def session(self) -> SparkSession:
        """The SparkSession for these settings (built on first use)."""
        return get_spark(self.settings())
