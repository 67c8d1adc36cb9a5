"""Object-storage settings: one clear line for each bad value, credentials never shown, the same store for Spark,
pyiceberg and pyarrow; and a missing bucket named before any JVM starts."""

from __future__ import annotations

from dataclasses import replace

import pytest

from infra.catalog import pyiceberg_catalog, spark_catalog_conf
from infra.errors import ConfigError
from infra.jars import S3_JARS, spark_jars
from infra.object_store import ObjectStore
from infra.settings import Settings
from pipelines.datasets import default_registry
from pipelines.io.formats import table_format
from tests.support.object_storage import in_bucket

S3_ENV = {
    "TRIBUTARY_WAREHOUSE": "s3://lake/prod/",
    "TRIBUTARY_S3_ENDPOINT": "http://127.0.0.1:9000/",
    "TRIBUTARY_S3_ACCESS_KEY": "analyst",
    "TRIBUTARY_S3_SECRET_KEY": "very-secret-value",
}


def _settings(monkeypatch, tmp_path, **env: str) -> Settings:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return Settings.from_env(home=tmp_path)


def test_bucket_warehouse_settings_reach_spark_pyiceberg_and_never_show_the_secret(monkeypatch, tmp_path):
    s = _settings(monkeypatch, tmp_path, **S3_ENV)
    assert s.warehouse_url == "s3a://lake/prod" and s.warehouse_uri == "s3a://lake/prod"
    assert s.object_store == ObjectStore("http://127.0.0.1:9000", "analyst", "very-secret-value", "us-east-1", True)
    assert "very-secret-value" not in repr(s) and "analyst" not in repr(s)

    conf = spark_catalog_conf(s)
    prefix = f"spark.sql.catalog.{s.catalog_name}"
    assert conf[f"{prefix}.warehouse"] == "s3a://lake/prod"
    assert conf[f"{prefix}.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf[f"{prefix}.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf[f"{prefix}.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf[f"{prefix}.hadoop.fs.s3a.directory.marker.retention"] == "keep"
    assert conf[f"{prefix}.hadoop.fs.s3a.secret.key"] == "very-secret-value"
    props = s.object_store.pyiceberg_properties()
    assert props["s3.endpoint"] == "http://127.0.0.1:9000" and props["s3.force-virtual-addressing"] == "false"
    assert ObjectStore.from_env(s.object_store.environment()) == s.object_store  # what a child process gets

    # On a local master s3a is on the driver's class path only; a cluster's executors get it as spark.jars.
    cache = s.jar_cache
    local = spark_jars(s)
    assert {p.name for p in local.driver_class_path} == {j.file_name for j in S3_JARS}
    assert not {p.name for p in local.jars} & {j.file_name for j in S3_JARS}
    cluster = spark_jars(replace(s, spark_master="spark://127.0.0.1:7077"))
    assert {cache / j.file_name for j in S3_JARS} <= set(cluster.jars)
    on_disk = spark_jars(replace(s, warehouse_url=None, spark_master="spark://127.0.0.1:7077"))
    assert not {cache / j.file_name for j in S3_JARS} & set(on_disk.jars)


def test_aws_defaults_without_endpoint_or_keys(monkeypatch, tmp_path):
    s = _settings(monkeypatch, tmp_path, TRIBUTARY_WAREHOUSE="s3a://lake/x")
    assert s.object_store == ObjectStore(None, None, None, "us-east-1", path_style=False)
    conf = s.object_store.hadoop_conf()
    assert "fs.s3a.endpoint" not in conf and "fs.s3a.access.key" not in conf  # the AWS default chain decides
    assert s.object_store.where() == "AWS S3"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"TRIBUTARY_WAREHOUSE": "hdfs://nn/lake"},
            r"TRIBUTARY_WAREHOUSE='hdfs://nn/lake'.*s3a://bucket/prefix.*other URL schemes are not supported",
        ),
        ({"TRIBUTARY_WAREHOUSE": "s3a:///no-bucket"}, r"TRIBUTARY_WAREHOUSE='s3a:///no-bucket' is not an object"),
        (
            {"TRIBUTARY_CHECKPOINTS": "s3a://lake/ck"},
            r"TRIBUTARY_CHECKPOINTS='s3a://lake/ck': only the warehouse can be on object storage",
        ),
        (
            {**S3_ENV, "TRIBUTARY_TABLE_FORMAT": "delta"},
            r"TRIBUTARY_WAREHOUSE=s3a://lake/prod is on object storage, which holds Iceberg tables only",
        ),
        ({"TRIBUTARY_S3_ENDPOINT": "127.0.0.1:9000"}, r"TRIBUTARY_S3_ENDPOINT='127.0.0.1:9000' is not a server URL"),
        ({"TRIBUTARY_S3_ACCESS_KEY": "a"}, r"TRIBUTARY_S3_ACCESS_KEY is set but TRIBUTARY_S3_SECRET_KEY is not"),
        ({"TRIBUTARY_S3_PATH_STYLE": "maybe"}, r"TRIBUTARY_S3_PATH_STYLE='maybe' must be true or false"),
    ],
)
def test_bad_storage_settings_name_the_variable(monkeypatch, tmp_path, env, message):
    with pytest.raises(ConfigError, match=message) as raised:
        _settings(monkeypatch, tmp_path, **env)
    assert "very-secret-value" not in str(raised.value)


def test_missing_bucket_and_wrong_credentials_are_one_line(s3_server, base_settings, tmp_path):
    home = replace(base_settings.with_home(tmp_path), catalog_name="nobucket")
    missing = replace(home, warehouse_url="s3a://no-such-bucket/x", object_store=s3_server.store())
    with pytest.raises(ConfigError, match=r"TRIBUTARY_WAREHOUSE=s3a://no-such-bucket/x: bucket 'no-such-bucket' "):
        pyiceberg_catalog(missing)
    wrong = replace(missing, warehouse_url="s3a://lake/x", object_store=replace(s3_server.store(), secret_key="nope"))
    with pytest.raises(ConfigError, match=r"bucket 'lake' cannot be reached on TRIBUTARY_S3_ENDPOINT=http://") as e:
        pyiceberg_catalog(wrong)
    assert "nope" not in str(e.value) and "\n" not in str(e.value)


def test_a_delta_table_declared_in_a_bucket_home_is_refused_by_name(spark, s3_server, settings_factory):
    s = in_bucket(settings_factory(), s3_server)
    spec = replace(default_registry().get("silver.products"), table_format="delta")
    with pytest.raises(
        ConfigError, match=r"table silver.products declares format='delta', but TRIBUTARY_WAREHOUSE=s3a://lake/"
    ):
        table_format(s).ensure_table(spark, spec.outputs()[0], table_format=spec.table_format)
    assert not table_format(s).exists(spark, "silver.products")
