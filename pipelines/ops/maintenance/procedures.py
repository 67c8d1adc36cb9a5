"""Calling Iceberg's maintenance procedures: the operation names, the CALL statement, retries on commit conflicts."""

from __future__ import annotations

import time

from pyspark.sql import Row, SparkSession

from infra.errors import PipelineError
from infra.identifiers import validate_table_name
from infra.settings import Settings

REWRITE_DATA_FILES = "rewrite_data_files"
REWRITE_MANIFESTS = "rewrite_manifests"
EXPIRE_SNAPSHOTS = "expire_snapshots"
REMOVE_ORPHAN_FILES = "remove_orphan_files"
OPERATIONS = (REWRITE_DATA_FILES, REWRITE_MANIFESTS, EXPIRE_SNAPSHOTS, REMOVE_ORPHAN_FILES)
COMPACTION_OPERATIONS = (REWRITE_DATA_FILES, REWRITE_MANIFESTS)

# A commit that lost a race against a concurrent commit (after Iceberg's own commit retries) is re-planned from
# the new table state and tried again this many times in all, waiting a little longer each time.
COMMIT_ATTEMPTS = 3
_RETRY_WAIT_SECONDS = 1.0
_CONFLICT_MARKERS = ("CommitFailedException", "ValidationException", "SQLITE_BUSY")


def procedure_sql(settings: Settings, name: str, procedure: str, args: dict[str, str]) -> str:
    """The `CALL <catalog>.system.<procedure>(table => 'ns.t', ...)` statement for one table."""
    ns, table = validate_table_name(name)
    parts = [f"table => '{ns}.{table}'", *(f"{key} => {value}" for key, value in args.items())]
    return f"CALL {settings.catalog_name}.system.{procedure}({', '.join(parts)})"


def call_procedure(spark: SparkSession, name: str, procedure: str, sql: str) -> tuple[list[Row], int]:
    """Run one procedure; on a commit conflict re-run it (it re-plans from the new snapshot). Returns rows, attempts."""
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        try:
            return spark.sql(sql).collect(), attempt
        except Exception as exc:
            text = str(exc)
            first = _reason(text) or type(exc).__name__
            if not any(marker in text for marker in _CONFLICT_MARKERS):
                raise PipelineError(f"table {name}: {procedure} failed: {first}") from exc
            if attempt == COMMIT_ATTEMPTS:
                raise PipelineError(
                    f"table {name}: {procedure} conflicted with concurrent commits {attempt} times ({first}); "
                    "the failed attempts changed nothing (an Iceberg commit is atomic): run maintenance again, "
                    "ideally between ingestion runs"
                ) from exc
            time.sleep(_RETRY_WAIT_SECONDS * attempt)
    raise AssertionError("unreachable")


def _reason(text: str) -> str:
    """The most telling line of a (Java) error: the first naming an exception, else the first line."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("at ")]
    for line in lines:
        if "Exception:" in line or "Error:" in line:
            return line[:400]
    return lines[0][:400] if lines else ""


def int_columns(row: Row) -> dict[str, int]:
    """The numeric columns of a procedure's result row, as integers."""
    return {key: int(value) for key, value in row.asDict().items() if isinstance(value, int | float)}
