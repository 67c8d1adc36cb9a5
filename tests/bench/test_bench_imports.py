"""Every `make bench` section imports and names an entry point, so a rename breaks `make test`, not the bench."""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from bench.run import SECTIONS


@pytest.mark.parametrize(("module", "function"), SECTIONS, ids=[m for m, _ in SECTIONS])
def test_bench_section_imports(module: str, function: str) -> None:
    assert callable(getattr(importlib.import_module(module), function))


def test_a_section_that_cannot_be_imported_fails_the_bench(monkeypatch, tmp_path, capsys) -> None:
    from bench import run

    monkeypatch.setattr(run, "SECTIONS", (("bench.no_such_section", "bench_nothing"),))
    monkeypatch.setattr(run, "RESULTS", tmp_path / "results.json")
    monkeypatch.setattr("sys.argv", ["bench.run"])
    assert run.main() == 1
    assert "no_such_section: cannot be imported" in capsys.readouterr().err
    assert "ModuleNotFoundError" in (tmp_path / "results.json").read_text()


def test_the_landing_parse_section_runs_on_a_tiny_input(spark, fresh_settings) -> None:
    from bench.pipeline import bench_landing_parse
    from pipelines.datasets.ecommerce.sample_data import generate

    generate(fresh_settings.landing, rows=200, files=2, seed=1)
    out = bench_landing_parse(spark, fresh_settings, repeats=1, csv_rows=300)
    assert out["csv_rows"] == 300
    for key in ("ratio_json_vs_spark_reader", "ratio_csv_vs_spark_reader", "rescue_vs_typed_lines"):
        assert out[key] > 0, key
    assert set(out["targets"]) == {
        "rescue_within_1.1x_typed_lines",
        "json_within_1.3x_spark_reader",
        "csv_within_1.3x_spark_reader",
    }


def test_the_wide_csv_section_runs_on_a_tiny_input(spark, fresh_settings) -> None:
    from bench.wide_csv import RESENT_ROWS, bench_wide_csv

    out = bench_wide_csv(fresh_settings, rows=1_200, small_rows=300, days=200, increment_rows=300, in_process=True)
    # The increment's re-sent rows are dropped by the dedupe; gold equals plain Spark's to the row.
    assert out["silver_rows"] == 1_200 + 300 - RESENT_ROWS
    assert out["gold_equal_to_plain_spark"] is True
    assert out["columns"] >= 15 and out["files"] >= 10
    # 200 days of order times: the silver table's default days(ordered_at) became months, 7 partitions.
    assert out["silver_partitioned_by"] == "months(ordered_at)"
    assert out["silver_data_files"] <= 2 * 8
    for key in ("ratio_chain_vs_plain_spark", "ratio_bronze_vs_plain_spark", "ratio_increment_large_vs_small"):
        assert out[key] > 0, key
    assert out["targets"]["silver_rows_exact"] and out["targets"]["gold_equal_to_plain_spark"]


def test_the_quality_section_runs_on_a_tiny_input(fresh_settings) -> None:
    from bench.quality import bench_quality

    out = bench_quality(fresh_settings, rows=300, files=2)
    # The sample data's rows pass every check but freshness (its event times are not today's), and every landed
    # line is accounted for.
    assert out["reconciliation_passed"] is True
    assert out["gx_suite_failed"] == ["newest event_time within 1 day"] and out["gx_expectations"] > 5
    assert out["silver_rows_written"] > 0 and out["checks_seconds"] > 0
    assert out["reconciliation_read_from_commits"] and out["reconciliation_deep_passed"]
    assert out["increment"]["read_from_commits"] and out["increment"]["passed"]
    assert out["increment"]["gx_proven_by_commits"] and out["increment"]["gx_equal_to_from_scratch"]
    assert set(out["targets"]) == {"gx_suite_within_10pct_of_silver", "checks_within_10pct_of_silver"}


def test_the_serving_section_runs_on_a_tiny_input(spark, tmp_path_factory) -> None:
    from bench.serving import bench_serving
    from infra.spark import get_spark
    from tests.support.homes import make_settings

    # The serving PostgreSQL runs as the postgres user when we are root: it must pass through the home's folders,
    # which pytest's own temporary folders (0o700) do not let it.
    folder = Path(tempfile.mkdtemp(prefix="serving-bench-"))
    os.chmod(folder, 0o711)
    try:
        settings = make_settings(folder)
        assert get_spark(settings) is spark
        out = bench_serving(settings, rows=2_000, thrift=False)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert out["rows"] == 2_000
    assert out["served_equals_lakehouse"] is True
    assert (out["updated"], out["inserted"], out["deleted"]) == (20, 0, 0)  # 1 % of the rows
    assert out["incremental_snapshot"] == out["update_snapshot"]
    for key in ("first_sync_seconds", "incremental_sync_seconds", "unchanged_sync_seconds"):
        assert out[key] >= 0, key
    for key in ("query_psycopg_seconds", "query_tributary_sql_seconds"):
        assert out[key] > 0, key
    assert "query_thrift_seconds" not in out and "thrift_error" not in out
    assert out["targets"]["served_equals_lakehouse"] and out["targets"]["incremental_updated_the_changed_rows"]
