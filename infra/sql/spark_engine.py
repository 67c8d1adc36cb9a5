"""`tributary sql --engine spark`: Spark SQL for what DuckDB cannot do, under the SQL server's read-only rules.

The statement is checked by the same policy as the SQL server (`tributary.sql.ReadOnlyPolicy` in the SQL
guard jar, which is on every Tributary Spark session's class path): parsed first, without running anything,
then its analysed plan once more before any row is read. Queries run in a separate Spark session of the
process's JVM whose catalog connection is opened read-only where the catalog database supports it, with
`spark.sql.runSQLOnFiles=false`; the pipelines' own session is left untouched.
"""

from __future__ import annotations

import contextlib
import re
import threading
from datetime import UTC, datetime
from typing import Any

from infra.catalog import DELTA_CATALOG, delta_catalog_conf, spark_catalog_conf
from infra.errors import ConfigError, SetupError, TributaryError, first_line
from infra.settings import Settings
from infra.sql.catalog import CatalogReader, QueryRefused, QueryResult, meta_command, unknown_table
from infra.sql.delta_tables import delta_tables

POLICY_CLASS = "tributary.sql.ReadOnlyPolicy"
_lock = threading.Lock()
_sessions: dict[Settings, tuple[Any, Any]] = {}  # settings -> (the JVM session it was made from, read-only session)


def _policy(spark: Any) -> Any:
    from py4j.java_gateway import JavaClass

    policy = spark._jvm.tributary.sql.ReadOnlyPolicy
    if not isinstance(policy, JavaClass):
        raise SetupError(
            f"the SQL guard class {POLICY_CLASS} is not on this Spark session's class path: run 'make setup' "
            "(it compiles the guard jar) and restart the Python process"
        )
    return policy


def check_spark_read_only(spark: Any, sql: str) -> None:
    """Raise QueryRefused unless `sql` is one read-only query (the SQL server's rules), without running it.

    Refused: every statement but queries, SHOW, DESCRIBE, EXPLAIN and USE; INSERT ... DIRECTORY; TRANSFORM;
    reading files by path (`csv.`/path``); reflection functions (`reflect`, `java_method`).
    """
    try:
        plan = spark._jsparkSession.sessionState().sqlParser().parsePlan(sql)
    except Exception as exc:  # py4j wraps Spark's ParseException
        text = str(exc)
        detail = re.search(r"ParseException:\s*(.*)", text)
        raise TributaryError(f"cannot parse the query: {(detail.group(1) if detail else text).strip()}") from exc
    refusal = _policy(spark).parsedRefusal(spark._jsparkSession, plan)
    if refusal:
        raise QueryRefused(refusal)


def home_session(spark: Any, settings: Settings) -> Any:
    """A new session of `spark`'s JVM whose catalogs are those of `settings`' home (its Iceberg catalog and its
    Delta tables), starting in the home's default catalog: unqualified names resolve as the home's users expect,
    whichever home the JVM started with."""
    session = spark.newSession()
    for key, value in {**spark_catalog_conf(settings), **delta_catalog_conf(settings)}.items():
        session.conf.set(key, value)
    return session


def read_only_session(spark: Any, settings: Settings) -> Any:
    """A session of `spark`'s JVM for analysts' queries: read-only catalog connection, no SQL on files."""
    from infra.sql.server import read_only_catalog_uri

    with _lock:
        known = _sessions.get(settings)
        if known is not None and known[0] is spark._jsparkSession:
            return known[1]
        session = home_session(spark, settings)  # starts in the home's default catalog
        # A catalog database the platform cannot open read-only keeps its URI: the statement checks still hold.
        with contextlib.suppress(ConfigError):
            session.conf.set(f"spark.sql.catalog.{settings.catalog_name}.uri", read_only_catalog_uri(settings))
        session.conf.set("spark.sql.runSQLOnFiles", "false")
        # Nothing here may load a catalog (e.g. catalog.setCurrentCatalog): Spark reads a catalog's settings from
        # the *active* session's configuration, which outside session.sql() is the pipelines' session.
        _sessions[settings] = (spark._jsparkSession, session)
        return session


def _utc(value: object) -> object:
    # Spark returns naive datetimes in the Python process's local time zone.
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.astimezone(UTC)
    return value


def spark_query(settings: Settings, sql: str) -> QueryResult:
    """Run one read-only query through Spark SQL (for what DuckDB cannot do); time travel with FOR ... AS OF."""
    catalog = CatalogReader(settings)
    answered = meta_command(catalog, sql)
    if answered is not None:
        return answered
    from pyspark.errors import AnalysisException

    from infra.spark import get_spark

    session = read_only_session(get_spark(settings), settings)
    check_spark_read_only(session, sql)
    try:
        df = session.sql(sql)  # analyses the query; runs nothing, since only queries got through
        refusal = _policy(session).analyzedRefusal(df._jdf.queryExecution().analyzed())
        if refusal:
            raise QueryRefused(refusal)
        rows = df.collect()
    except AnalysisException as exc:
        text = str(exc)
        match = re.search(r"TABLE_OR_VIEW_NOT_FOUND\].*?`([^`]+)`(?:\.`([^`]+)`)?(?:\.`([^`]+)`)?", text)
        if match:
            parts = [p for p in match.groups() if p]
            name = ".".join(parts[-2:]) if len(parts) >= 2 else parts[0]
            if name in delta_tables(settings) and settings.table_format != "delta":
                raise ConfigError(
                    f"{name} is a Delta table in an Iceberg home: name it {DELTA_CATALOG}.{name}"
                ) from exc
            raise unknown_table(name, catalog.tables()) from exc
        raise TributaryError(f"query failed: {first_line(exc)}") from exc
    return QueryResult(tuple(df.columns), [tuple(_utc(v) for v in row) for row in rows])
