"""`tributary demo --storage s3` (what `make demo-s3` runs): every table in a bucket of an S3 test server that the
demo starts and stops, equal to the same pipeline on local disk."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import replace

import pytest

from infra.ports import port_free
from infra.s3_server import start_s3_server
from infra.sql.local import LocalEngine
from orchestration.cli.demo import DEMO_BUCKET
from pipelines.datasets import default_registry
from pipelines.run.pipeline import run_pipeline
from tests.support.jvm import short_lived
from tests.support.repo import TRIBUTARY

ROWS, FILES, SEED = 3000, 3, 7  # the demo's seed


def _contents(engine: LocalEngine, name: str) -> list[tuple]:
    """The table's rows without lineage columns (`_source_file` and the like name each home's own paths)."""
    columns = [c for c in engine.query(f"SELECT * FROM {name} LIMIT 0").columns if not c.startswith("_")]
    rows = engine.query(f"SELECT {', '.join(columns)} FROM {name}").rows
    return sorted(rows, key=repr)


@pytest.mark.slow
def test_demo_on_object_storage_equals_local_disk(spark, settings_factory, tmp_path):
    home = tmp_path / "home"
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("TRIBUTARY_S3_", "TRIBUTARY_WAREHOUSE"))}
    env = {**short_lived(inherited), "TRIBUTARY_HOME": str(home), "DAGSTER_HOME": str(tmp_path / "dagster")}
    args = [TRIBUTARY, "demo", "--storage", "s3", "--rows", str(ROWS), "--files", str(FILES), "--seed", str(SEED)]
    demo = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-3000:]
    assert "tributary: warning" not in demo.stderr, demo.stderr[-3000:]  # e.g. the run log not written to the bucket
    started = re.search(r"started the S3 test server on http://127\.0\.0\.1:(\d+)", demo.stdout)
    assert started, demo.stdout[-2000:]
    assert port_free(int(started[1])), "the demo left its S3 test server running"
    assert f"tables in s3a://{DEMO_BUCKET}/warehouse" in demo.stdout
    assert "secret" not in demo.stdout.lower() + demo.stderr.lower()
    assert "The S3 test server stopped with the demo" in demo.stdout and "tributary sql" not in demo.stdout
    bucket = home / "s3-server" / "buckets" / DEMO_BUCKET / "warehouse"
    assert any((bucket / "gold" / "daily_revenue" / "data").rglob("*.parquet"))
    assert not (home / "warehouse").exists()  # nothing of the tables on local disk

    local = settings_factory()
    # The demo's own landed files: landing them again would date them from another day after midnight.
    shutil.copytree(home / "landing", local.landing, dirs_exist_ok=True)
    run_pipeline(spark, local, default_registry())
    expected_engine = LocalEngine(local)
    # Registry tables only: the run log's rows name runs and times of their own.
    names = [n for n in expected_engine.catalog.tables() if not n.endswith("_files") and not n.startswith("ops.")]
    assert len(names) >= 20

    server = start_s3_server(home / "s3-server", local.jar_cache)  # the demo's data, read as `tributary sql` does
    try:
        in_bucket = replace(
            local.with_home(home),
            catalog_name="tributary",
            warehouse_url=f"s3a://{DEMO_BUCKET}/warehouse",
            object_store=server.store(),
        )
        engine = LocalEngine(in_bucket)
        listed = engine.catalog.tables()
        assert sorted(n for n in listed if not n.endswith("_files") and not n.startswith("ops.")) == sorted(names)
        assert "ops.run_log" in listed  # written into the bucket by pyiceberg, like the tables
        for name in names:
            assert _contents(engine, name) == _contents(expected_engine, name), name
        [(revenue_days,)] = engine.query("SELECT count(*) FROM gold.daily_revenue").rows
        assert revenue_days > 0
    finally:
        server.stop()
