"""One read-only analyst query, run by the chosen engine: DuckDB over pyiceberg scans, or Spark SQL."""

from __future__ import annotations

from infra.errors import ConfigError
from infra.settings import Settings
from infra.sql.catalog import QueryResult, validate_as_of
from infra.sql.local import ENGINES, LocalEngine
from infra.sql.spark_engine import spark_query


def run_query(settings: Settings, sql: str, engine: str = "duckdb", as_of: str | None = None) -> QueryResult:
    """Run one read-only query with the chosen engine (a fresh DuckDB connection for `duckdb`)."""
    as_of = validate_as_of(as_of)
    if engine == "spark":
        if as_of:
            raise ConfigError(
                "--as-of is for the local engine; with --engine spark write the time travel into the SQL: "
                "SELECT ... FROM gold.daily_revenue FOR VERSION AS OF <snapshot id> "
                "(or FOR TIMESTAMP AS OF '2026-11-21 15:00:00')"
            )
        return spark_query(settings, sql)
    if engine != "duckdb":
        raise ConfigError(f"unknown engine {engine!r}; choose one of {ENGINES}")
    engine_ = LocalEngine(settings, as_of=as_of)
    try:
        return engine_.query(sql)
    finally:
        engine_.close()
