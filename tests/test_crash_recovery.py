"""A run SIGKILLed in the middle of a batch, then re-run, ends with exactly the tables of an uninterrupted run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from infra.spark import get_spark
from pipelines.demo.generator import generate
from pipelines.pipeline import run_pipeline
from tests.conftest import make_settings
from tests.crash_registry import crash_registry
from tests.helpers import ALL_TABLES, table

REPO = Path(__file__).resolve().parent.parent


def _contents(spark, settings) -> dict[str, list[tuple]]:
    out = {}
    for name in ALL_TABLES:
        df = table(spark, settings, name)
        if "_source_file" in df.columns:  # homes differ: compare file names, not paths
            df = df.withColumn("_source_file", F.element_at(F.split("_source_file", "/"), -1))
        cols = [c for c in df.columns if c != "_ingested_at"]
        out[name] = sorted((tuple(r) for r in df.select(*cols).collect()), key=repr)
    return out


@pytest.fixture(scope="module")
def uninterrupted(spark, tmp_path_factory):
    s = make_settings(tmp_path_factory.mktemp("reference"))
    get_spark(s)
    generate(s.landing, rows=2400, files=4, seed=5)
    run_pipeline(spark, s, crash_registry())
    return _contents(spark, s)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "batch_id", "when"),
    [
        ("bronze.events", 1, "before"),  # killed before the batch reached the table
        ("bronze.events", 2, "after"),  # table committed, checkpoint not: the replay must be skipped
        ("silver.events", 0, "after"),  # silver and quarantine committed, checkpoint not
    ],
)
def test_sigkill_mid_batch_then_rerun_matches_uninterrupted(
    spark, fresh_settings, uninterrupted, target, batch_id, when
):
    s = fresh_settings
    generate(s.landing, rows=2400, files=4, seed=5)
    proc = subprocess.run(
        [sys.executable, "-m", "tests.crash_child", str(s.home), s.catalog_name, target, str(batch_id), when],
        cwd=REPO,
        env={**os.environ, "TRIBUTARY_HOME": str(s.home)},
        start_new_session=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == -9, f"child was not killed at the kill point: rc={proc.returncode}\n{proc.stderr[-3000:]}"
    committed_before = table(spark, s, "bronze.events").count() if target == "bronze.events" else None
    if when == "after" and target == "bronze.events":
        assert committed_before == 3 * 600, "the killed batch had been committed to the table"

    run_pipeline(spark, s, crash_registry())

    assert _contents(spark, s) == uninterrupted
