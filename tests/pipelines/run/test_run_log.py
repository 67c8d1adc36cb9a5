"""`ops.run_log`: one row per table run under one run id, failures with their error line, exactly once, no JVM to
write it, and queryable with `tributary sql` and Spark."""

from __future__ import annotations

import gzip

import pytest
from dagster import build_sensor_context

from infra.errors import TributaryError
from infra.sql.query import run_query
from orchestration.run_log_sensor import build_run_log_sensor
from pipelines.datasets import default_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.ops.maintenance.runner import run_maintenance
from pipelines.run import run_log
from pipelines.run.pipeline import run_pipeline
from tests.support.helpers import table

TABLES = ("bronze.events", "silver.events")
SQL = "SELECT run_id, trigger, table_name, status, error, rows_written, rows_in FROM ops.run_log"


def _log(settings) -> list[dict]:
    result = run_query(settings, SQL + " ORDER BY ended_at, table_name")
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]


@pytest.mark.slow
def test_every_table_run_is_logged_once_failures_included(spark, format_settings):
    s = format_settings
    generate(s.landing, rows=300, files=1, seed=5)
    reports = {r.table: r for r in run_pipeline(spark, s, default_registry(), TABLES)}

    rows = _log(s)
    assert [r["table_name"] for r in rows] == list(TABLES)
    assert len({r["run_id"] for r in rows}) == 1
    assert all(r["trigger"] == "cli" and r["status"] == "succeeded" and r["error"] is None for r in rows)
    assert {r["table_name"]: r["rows_written"] for r in rows} == {t: reports[t].rows_written(t) for t in TABLES}
    assert rows[0]["rows_in"] == 300

    # A run with nothing to do commits nothing: its rows wait, and the next fold commits them once.
    run_pipeline(spark, s, default_registry(), TABLES)
    assert len(_log(s)) == 2
    assert len(list(run_log.pending_dir(s).glob("*.json"))) == 2
    pending = [row for _, row in run_log._pending(s)]
    run_log._append_new(s, pending)  # as if a fold were killed after its commit, before removing its files
    assert run_log.fold(s) == 0
    rows = _log(s)
    assert [r["status"] for r in rows[2:]] == ["skipped", "skipped"]
    assert len(rows) == 4 and not list(run_log.pending_dir(s).glob("*.json"))

    # A failed run leaves its row with the error's one line; the tables after it did not run.
    (s.landing / "events" / "packed.json").write_bytes(gzip.compress(b'{"event_id": "x"}\n'))
    with pytest.raises(TributaryError, match=r"packed\.json holds gzip data"):
        run_pipeline(spark, s, default_registry(), TABLES)
    failed = _log(s)[4:]
    assert [(r["table_name"], r["status"]) for r in failed] == [("bronze.events", "failed")]
    assert "packed.json holds gzip data" in failed[0]["error"] and "\n" not in failed[0]["error"]

    # Spark reads the same table.
    assert table(spark, s, run_log.RUN_LOG).filter("status = 'failed'").count() == 1

    # Under Dagster the sensor commits what runs left pending, without starting a run.
    (s.landing / "events" / "packed.json").unlink()
    run_pipeline(spark, s, default_registry(), TABLES)
    assert len(list(run_log.pending_dir(s).glob("*.json"))) == 2
    tick = build_run_log_sensor(s).evaluate_tick(build_sensor_context())
    assert not tick.run_requests and "2 run rows committed" in tick.skip_message
    assert len(_log(s)) == 7 and not list(run_log.pending_dir(s).glob("*.json"))

    # The maintenance assets keep it tidy like any table: its small appends are compacted, no row changes.
    report = run_maintenance(spark, s, default_registry(), run_log.RUN_LOG)
    assert not report.skipped and len(_log(s)) == 7
