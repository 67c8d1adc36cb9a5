"""The Iceberg catalog, shared by Spark (JdbcCatalog) and pyiceberg (SqlCatalog).

Both speak the same `iceberg_tables` schema. pyiceberg creates the catalog tables first; Spark is then told
not to (`jdbc.init-catalog-tables=false`), because Iceberg (seen in 1.10.2) leaks a result set while initialising them
and the stale SQLite read transaction later fails commits with SQLITE_BUSY_SNAPSHOT.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from urllib.parse import parse_qsl, quote, urlsplit

from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy.exc import DBAPIError

from infra.errors import ConfigError
from infra.settings import Settings

_OPEN_ATTEMPTS = 3
_CREATED_MEANWHILE = ("already exists", "duplicate key value")  # SQLite, PostgreSQL


def sqlalchemy_uri(settings: Settings) -> str:
    """The SQLAlchemy URI pyiceberg uses for the same catalog database Spark reaches over JDBC."""
    if settings.uses_sqlite:
        return f"sqlite:///{settings.catalog_db}"
    uri = os.environ.get("TRIBUTARY_CATALOG_SQLALCHEMY_URI")
    if not uri:
        raise ConfigError(
            "TRIBUTARY_CATALOG_URI points at a non-SQLite catalog: set TRIBUTARY_CATALOG_SQLALCHEMY_URI to the "
            "same database for pyiceberg (e.g. postgresql+psycopg2://user:pw@host/db)"
        )
    return uri


def _open(settings: Settings, uri: str | None = None) -> SqlCatalog:
    if settings.uses_sqlite:
        settings.catalog_db.parent.mkdir(parents=True, exist_ok=True)
    if settings.warehouse_url is None:
        settings.warehouse.mkdir(parents=True, exist_ok=True)
    else:
        settings.object_store.require_bucket("TRIBUTARY_WAREHOUSE", settings.warehouse_url)
    # SqlCatalog creates iceberg_tables / iceberg_namespace_properties if they are missing. Processes that open
    # a new catalog at once (two runs started together, Dagster's code server and a run) all see them missing
    # and all create them; the ones that lose find them made, so they open it again.
    for attempt in range(_OPEN_ATTEMPTS):
        try:
            url, warehouse = uri or sqlalchemy_uri(settings), settings.warehouse_uri
            return SqlCatalog(settings.catalog_name, uri=url, warehouse=warehouse, **file_io_properties(settings))
        except DBAPIError as exc:
            if attempt == _OPEN_ATTEMPTS - 1 or not any(m in str(exc) for m in _CREATED_MEANWHILE):
                raise
    raise AssertionError("unreachable")


def file_io_properties(settings: Settings) -> dict[str, str]:
    """pyiceberg FileIO properties that reach the table files: the object store's, for a warehouse in a bucket."""
    return settings.object_store.pyiceberg_properties() if settings.warehouse_url else {}


@lru_cache(maxsize=8)
def _cached(settings: Settings) -> SqlCatalog:
    return _open(settings)


def pyiceberg_catalog(settings: Settings) -> SqlCatalog:
    """A pyiceberg catalog over the platform's catalog database (catalog tables created if missing)."""
    return _cached(settings)


def catalog_at(settings: Settings, sqlalchemy: str) -> SqlCatalog:
    """A pyiceberg catalog named like `settings`' over another catalog database, given its SQLAlchemy URI."""
    return _open(settings, sqlalchemy)


def sqlalchemy_of_jdbc(jdbc: str) -> str:
    """The SQLAlchemy URI of a PostgreSQL JDBC URL (`jdbc:postgresql://host:port/db?user=..&password=..`)."""
    parts = urlsplit(jdbc.removeprefix("jdbc:"))
    if parts.scheme != "postgresql" or not parts.hostname or not parts.path.strip("/"):
        raise ConfigError(
            f"{_without_password(jdbc)} is not a PostgreSQL JDBC URL (jdbc:postgresql://host:port/database?user=..&"
            "password=..): give one, or set TRIBUTARY_CATALOG_SQLALCHEMY_URI to the same database"
        )
    query = dict(parse_qsl(parts.query))
    user = quote(query.get("user", ""), safe="")
    password = quote(query.get("password", ""), safe="")
    login = f"{user}:{password}@" if password else f"{user}@" if user else ""
    port = f":{parts.port}" if parts.port else ""
    return f"postgresql+psycopg2://{login}{parts.hostname}{port}/{parts.path.strip('/')}"


def postgres_dsn(settings: Settings) -> str | None:
    """A libpq URI (psycopg2) of the catalog database when it is PostgreSQL, else None: from
    `TRIBUTARY_CATALOG_SQLALCHEMY_URI` when set, else from the JDBC URL."""
    jdbc = settings.jdbc_catalog_uri
    if not jdbc.startswith("jdbc:postgresql:"):
        return None
    uri = os.environ.get("TRIBUTARY_CATALOG_SQLALCHEMY_URI") or sqlalchemy_of_jdbc(jdbc)
    return re.sub(r"^postgresql\+\w+://", "postgresql://", uri)


def _without_password(url: str) -> str:
    return re.sub(r"password=[^&;]*", "password=***", url)


DELTA_CATALOG = "delta"


def delta_catalog_conf(settings: Settings) -> dict[str, str]:
    """Spark settings that register the warehouse's Delta tables as the read-only catalog `delta`
    (`infra/jvm/tributary/sql/DeltaFolderCatalog.java`): `delta.gold.daily_revenue` in any home, and plain
    `gold.daily_revenue` in a Delta home, whose default catalog it is."""
    from infra.jars import DELTA_FOLDER_CATALOG

    conf = {
        # delta-spark refuses to read or stream a Delta table by path unless the session catalog is its own.
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        f"spark.sql.catalog.{DELTA_CATALOG}": DELTA_FOLDER_CATALOG,
        f"spark.sql.catalog.{DELTA_CATALOG}.root": settings.delta_warehouse.as_uri(),
    }
    if settings.table_format == "delta":
        conf["spark.sql.defaultCatalog"] = DELTA_CATALOG
    return conf


def spark_catalog_conf(settings: Settings) -> dict[str, str]:
    """Spark settings that register the Iceberg catalog under `settings.catalog_name` (the default catalog of an
    Iceberg home)."""
    prefix = f"spark.sql.catalog.{settings.catalog_name}"
    conf = {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        f"{prefix}.uri": settings.jdbc_catalog_uri,
        f"{prefix}.jdbc.schema-version": "V1",
        f"{prefix}.jdbc.init-catalog-tables": "false",
        f"{prefix}.warehouse": settings.warehouse_uri,
        # Other processes (pyiceberg readers, maintenance, a second run) commit to the same tables:
        # a cached table would serve stale snapshots to dedup lookups and stats.
        f"{prefix}.cache-enabled": "false",
        # Manifests, unlike table metadata, are never rewritten in place (each commit writes new files), so their
        # contents are cached (at most 100 MB of the driver's heap): every lookup, stats read and scan plan of a
        # table reads all its manifests. A small increment through the demo tables took about 5 % less.
        f"{prefix}.io.manifest.cache-enabled": "true",
        f"{prefix}.io.manifest.cache.expiration-interval-ms": str(10 * 60 * 1000),
        "spark.sql.defaultCatalog": settings.catalog_name,
    }
    if settings.warehouse_url is not None:
        # The store's s3a settings for this catalog's tables only (Iceberg's `hadoop.*` catalog properties), so
        # one session serves homes on disk and in buckets. Hadoop caches a file system per bucket: two homes in
        # one process must not reach the same bucket through different stores.
        conf.update({f"{prefix}.hadoop.{k}": v for k, v in settings.object_store.hadoop_conf().items()})
    return conf
