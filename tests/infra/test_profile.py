"""The deployment profile: what cannot work on a cluster is refused by name before any JVM starts."""

from __future__ import annotations

import pytest

from infra.deploy import CLUSTER_INSTANCE, LOCAL_INSTANCE, instance_yaml
from infra.errors import ConfigError
from infra.executors import executor_wait
from infra.settings import Settings
from infra.spark import spark_conf

PG = "jdbc:postgresql://db:5432/tributary?user=t&password=secret-pw"
PG_ALCHEMY = "postgresql+psycopg2://t:secret-pw@db:5432/tributary"
DAGSTER_PG = "postgresql+psycopg2://t:secret-pw@db:5432/dagster"


@pytest.fixture
def cluster_env(monkeypatch):
    """A complete cluster profile on a master on another host with shared storage."""
    env = {
        "TRIBUTARY_PROFILE": "cluster",
        "TRIBUTARY_SPARK_MASTER": "spark://spark-master:7077",
        "TRIBUTARY_CATALOG_URI": PG,
        "TRIBUTARY_CATALOG_SQLALCHEMY_URI": PG_ALCHEMY,
        "TRIBUTARY_DAGSTER_STORAGE_URL": DAGSTER_PG,
        "TRIBUTARY_SHARED_STORAGE": "true",
        "TRIBUTARY_EXECUTOR_MEMORY": "2g",
        "TRIBUTARY_EXECUTOR_CORES": "2",
        "TRIBUTARY_MAX_CORES": "8",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return monkeypatch


def test_a_complete_cluster_profile_sets_the_executors_and_hides_the_passwords(cluster_env, tmp_path):
    settings = Settings.from_env(home=tmp_path)
    assert settings.deployment.cluster and not settings.uses_sqlite
    conf = spark_conf(settings)
    assert conf["spark.master"] == "spark://spark-master:7077"
    assert (conf["spark.executor.memory"], conf["spark.executor.cores"], conf["spark.cores.max"]) == ("2g", "2", "8")
    # Executors on other hosts reach the driver on its host name: nothing is pinned to loopback.
    assert settings.listen_address is None and "spark.driver.bindAddress" not in conf
    assert "secret-pw" not in repr(settings)
    assert instance_yaml(settings.deployment) == CLUSTER_INSTANCE
    assert "TRIBUTARY_DAGSTER_STORAGE_URL" in CLUSTER_INSTANCE.read_text()


def test_the_local_profile_keeps_the_embedded_defaults(tmp_path):
    settings = Settings.from_env(home=tmp_path)
    assert settings.deployment.profile == "local" and settings.uses_sqlite
    assert instance_yaml(settings.deployment) == LOCAL_INSTANCE
    assert "spark.executor.memory" not in spark_conf(settings)


def test_a_master_on_this_machine_listens_on_loopback_only(monkeypatch, tmp_path):
    monkeypatch.setenv("TRIBUTARY_SPARK_MASTER", "spark://127.0.0.1:7077")
    settings = Settings.from_env(home=tmp_path)  # local folders: its workers can only be on this machine
    assert settings.listen_address == "127.0.0.1"
    assert spark_conf(settings)["spark.driver.bindAddress"] == "127.0.0.1"


@pytest.mark.parametrize(
    "changes,expected",
    [
        ({"TRIBUTARY_PROFILE": "prod"}, "TRIBUTARY_PROFILE='prod' is not a profile"),
        ({"TRIBUTARY_CATALOG_URI": ""}, "SQLite allows one writer on one machine: set TRIBUTARY_CATALOG_URI"),
        ({"TRIBUTARY_SPARK_MASTER": "local[2]"}, "TRIBUTARY_SPARK_MASTER='local[2]'; set it to the master"),
        ({"TRIBUTARY_SHARED_STORAGE": ""}, "TRIBUTARY_WAREHOUSE="),
        ({"TRIBUTARY_SHARED_STORAGE": "maybe"}, "TRIBUTARY_SHARED_STORAGE='maybe' must be true or false"),
        ({"TRIBUTARY_EXECUTOR_MEMORY": "lots"}, "TRIBUTARY_EXECUTOR_MEMORY='lots' is not a JVM memory size"),
        ({"TRIBUTARY_EXECUTOR_MEMORY": "256m"}, "TRIBUTARY_EXECUTOR_MEMORY='256m' is too small"),
        ({"TRIBUTARY_EXECUTOR_CORES": "0"}, "TRIBUTARY_EXECUTOR_CORES must be a positive integer"),
        ({"TRIBUTARY_MAX_CORES": "x"}, "TRIBUTARY_MAX_CORES must be a positive integer"),
        ({"TRIBUTARY_EXECUTOR_WAIT": "0"}, "TRIBUTARY_EXECUTOR_WAIT must be a whole number of seconds (1 or more)"),
        ({"TRIBUTARY_EXECUTOR_WAIT": "5s"}, "TRIBUTARY_EXECUTOR_WAIT must be a whole number of seconds"),
        ({"TRIBUTARY_SPARK_CONF": "spark.executor.cores=-1"}, "TRIBUTARY_SPARK_CONF key spark.executor.cores"),
        (
            {"TRIBUTARY_DAGSTER_STORAGE_URL": "postgresql://t:secret-pw@db/dagster"},
            "TRIBUTARY_DAGSTER_STORAGE_URL starts with 'postgresql'; write it as postgresql+psycopg2://",
        ),
    ],
)
def test_what_cannot_work_on_a_cluster_is_refused_by_name(cluster_env, tmp_path, changes, expected):
    for key, value in changes.items():
        cluster_env.setenv(key, value)
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(home=tmp_path)
    message = str(caught.value)
    assert expected in message and "secret-pw" not in message
    assert "\n" not in message


def test_local_folders_with_a_remote_master_name_the_folder_and_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("TRIBUTARY_SPARK_MASTER", "spark://10.1.2.3:7077")
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(home=tmp_path)
    message = str(caught.value)
    assert message.startswith(f"TRIBUTARY_WAREHOUSE={tmp_path.resolve() / 'warehouse'} is a folder on this machine")
    assert "set TRIBUTARY_SHARED_STORAGE=true" in message
    monkeypatch.setenv("TRIBUTARY_SHARED_STORAGE", "yes")
    assert Settings.from_env(home=tmp_path).deployment.shared_storage


def test_the_cluster_instance_needs_its_database(cluster_env, tmp_path):
    cluster_env.delenv("TRIBUTARY_DAGSTER_STORAGE_URL")
    settings = Settings.from_env(home=tmp_path)
    with pytest.raises(ConfigError, match="set TRIBUTARY_DAGSTER_STORAGE_URL=postgresql\\+psycopg2://"):
        instance_yaml(settings.deployment)


def test_the_wait_for_executors_is_the_lock_wait_at_least_30_s_unless_set(cluster_env, tmp_path):
    assert executor_wait(Settings.from_env(home=tmp_path).lock_wait_seconds, None) == 900
    assert executor_wait(0, None) == 30  # executors take seconds to start
    cluster_env.setenv("TRIBUTARY_EXECUTOR_WAIT", "5")
    settings = Settings.from_env(home=tmp_path)
    assert executor_wait(settings.lock_wait_seconds, settings.deployment.executor_wait_seconds) == 5
