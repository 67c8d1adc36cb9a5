"""Bad input gets one clear message naming what is at fault, never a stack dump."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infra.errors import ConfigError, PipelineError
from infra.identifiers import validate_table_name
from pipelines.datasets import default_registry
from pipelines.demo.generator import generate
from pipelines.pipeline import run_pipeline

TRIBUTARY = str(Path(sys.executable).parent / "tributary")


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([TRIBUTARY, *args], capture_output=True, text=True, env=env or dict(os.environ), timeout=300)


def test_missing_landing_folder_names_the_folder(spark, fresh_settings):
    with pytest.raises(PipelineError, match=r"landing folder .*/landing/events does not exist"):
        run_pipeline(spark, fresh_settings, default_registry(), ["bronze.events"])


def test_unreadable_landing_file_names_the_file(spark, fresh_settings):
    s = fresh_settings
    generate(s.landing, rows=100, files=1, seed=3)
    bad = s.landing / "events" / "broken.json.gz"
    bad.write_bytes(gzip.compress(b'{"event_id": "x"}\n' * 50)[:40])  # a truncated gzip stream
    with pytest.raises(PipelineError, match=r"broken\.json\.gz"):
        run_pipeline(spark, s, default_registry(), ["bronze.events"])


def test_broken_link_in_landing_is_reported(spark, fresh_settings):
    s = fresh_settings
    generate(s.landing, rows=100, files=1, seed=3)
    (s.landing / "events" / "gone.json").symlink_to(s.landing / "nowhere.json")
    with pytest.raises(PipelineError, match=r"gone\.json"):
        run_pipeline(spark, s, default_registry(), ["bronze.events"])


@pytest.mark.parametrize("name", ["Gold.daily", "gold.daily-revenue", "gold", "gold.x; DROP TABLE y", "a.b.c"])
def test_invalid_table_names_are_refused(name):
    with pytest.raises(ConfigError, match="not a valid identifier"):
        validate_table_name(name)


def test_cli_reports_errors_without_traceback(tmp_path):
    env = {**os.environ, "TRIBUTARY_HOME": str(tmp_path)}
    bad_name = _cli("run", "gold.daily-revenue", env=env)
    assert bad_name.returncode == 2
    assert "not a valid identifier" in bad_name.stderr and "Traceback" not in bad_name.stderr
    unknown = _cli("run", "gold.nope", env=env)
    assert unknown.returncode == 2
    assert (
        "known tables: " in unknown.stderr
        and "gold.daily_revenue" in unknown.stderr
        and "Traceback" not in unknown.stderr
    )
    bad_setting = _cli("run", env={**env, "TRIBUTARY_TABLE_FORMAT": "orc"})
    assert bad_setting.returncode == 2 and "TRIBUTARY_TABLE_FORMAT='orc'" in bad_setting.stderr


def test_missing_java_is_reported(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # A PATH with the venv's tools but no java.
    os.symlink(sys.executable, bin_dir / "python")
    env = {**os.environ, "PATH": str(bin_dir), "TRIBUTARY_HOME": str(tmp_path), "JAVA_HOME": ""}
    result = _cli("setup", env=env)
    assert result.returncode == 2
    assert "Java 17 is required" in result.stderr and "Traceback" not in result.stderr
    assert shutil.which("java", path=str(bin_dir)) is None
