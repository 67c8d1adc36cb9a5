"""Dagster resources built on `infra`: the settings and the process's SparkSession."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from dagster import ConfigurableResource
from pyspark.sql import SparkSession

from infra.settings import Settings
from infra.spark import get_spark


class SparkResource(ConfigurableResource):
    """Gives assets the platform settings and the one SparkSession of the run's process."""

    home: str | None = None
    catalog_name: str | None = None

    def settings(self) -> Settings:
        """Settings from `TRIBUTARY_*` variables; `home` and `catalog_name` override theirs when given."""
        settings = Settings.from_env(home=self.home)
        if self.home:
            settings = settings.with_home(Path(self.home))
        if self.catalog_name:
            settings = replace(settings, catalog_name=self.catalog_name)
        return settings

    def session(self) -> SparkSession:
        """The SparkSession for these settings (built on first use)."""
        return get_spark(self.settings())
