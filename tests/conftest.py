"""Shared fixtures: one SparkSession for the whole test session, and isolated platform homes.

Each `fresh_settings` gets its own folder, SQLite catalog and catalog name; the running SparkSession
registers that catalog, so tests stay isolated without paying a JVM start each.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest
from pyspark.sql import SparkSession

from infra.kafka_broker import Broker, start_broker
from infra.s3_server import S3Server, start_s3_server
from infra.settings import TABLE_FORMATS, Settings
from infra.spark import get_spark
from tests.support.homes import make_settings
from tests.support.object_storage import TEST_BUCKET
from tests.support.repo import REPO

# Small data: few shuffle partitions. Set in the environment so settings built by Dagster resources agree.
os.environ.setdefault("TRIBUTARY_SHUFFLE_PARTITIONS", "2")
# What `make test` exports, so that a plain `pytest` (after `make demo`, or from a shell set up for a project)
# runs the suite the same way: the repository's home, a Dagster home, the demo datasets.
os.environ.setdefault("TRIBUTARY_HOME", str(REPO / ".tributary"))
os.environ.setdefault("DAGSTER_HOME", os.path.join(os.environ["TRIBUTARY_HOME"], "dagster"))
os.makedirs(os.environ["DAGSTER_HOME"], exist_ok=True)
# One schema cache for every home the tests make (its entries are keyed by all a schema depends on): loading the
# definitions in a new home (each CLI and Dagster process) infers only what no test inferred before, without a JVM.
os.environ.setdefault("TRIBUTARY_SCHEMA_CACHE", os.path.join(os.environ["TRIBUTARY_HOME"], "cache", "schemas"))
os.environ.pop("TRIBUTARY_DATASETS", None)


@pytest.fixture(scope="session")
def base_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Settings of the session-wide SparkSession."""
    return make_settings(tmp_path_factory.mktemp("home"))


@pytest.fixture(scope="session")
def spark(base_settings: Settings) -> SparkSession:
    """The one SparkSession of the test session."""
    return get_spark(base_settings)


@pytest.fixture
def settings_factory(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Callable[[], Settings]:
    """Make isolated settings registered on the shared SparkSession."""

    def factory() -> Settings:
        settings = make_settings(tmp_path_factory.mktemp("home"))
        assert get_spark(settings) is spark
        return settings

    return factory


@pytest.fixture(params=TABLE_FORMATS)
def format_settings(request: pytest.FixtureRequest, settings_factory: Callable[[], Settings]) -> Settings:
    """An isolated, empty platform home whose tables are in one table format: a test using it runs once per format."""
    return replace(settings_factory(), table_format=request.param)


@pytest.fixture
def fresh_settings(settings_factory: Callable[[], Settings]) -> Settings:
    """An isolated, empty platform home (landing, warehouse, checkpoints, catalog)."""
    return settings_factory()


@pytest.fixture(scope="session")
def s3_server(base_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """The S3 test server of this test process (started on first use), with the test bucket."""
    server = start_s3_server(tmp_path_factory.mktemp("s3"), base_settings.jar_cache)
    try:
        server.create_bucket(TEST_BUCKET)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One Kafka test broker for the module (each test uses its own topics), stopped after it."""
    started = start_broker(tmp_path_factory.mktemp("broker"))
    try:
        yield started
    finally:
        started.stop()
