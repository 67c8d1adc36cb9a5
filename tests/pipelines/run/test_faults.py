"""Faults that must not lose, double or stall rows: interrupted runs, replaced or vanished files, two writers,
and values or bytes that a producer should never have sent (issue 17)."""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from infra.errors import PipelineError
from infra.paths import open_landed
from infra.sql.query import run_query
from pipelines.datasets import default_registry
from pipelines.datasets.clickstream.sample_data import generate_clickstream, write_json_lines
from pipelines.datasets.ecommerce.sample_data import DEFAULT_START, generate
from pipelines.datasets.ecommerce.tables import event_counts_5m
from pipelines.run import locks
from pipelines.run.locks import lock_path, table_lock
from pipelines.run.pipeline import run_pipeline
from pipelines.run.runner import run_table
from pipelines.spec.sources import TableSource
from tests.support.crash_child import kill_in_child
from tests.support.crash_registry import crash_registry
from tests.support.helpers import table
from tests.support.jvm import short_lived
from tests.support.repo import REPO, TRIBUTARY


def _event(event_id: str, when: str, **extra) -> str:
    return json.dumps({"event_id": event_id, "event_type": "page_view", "event_time": when, "user_id": "u1", **extra})


def _land_lines(settings, name: str, lines: list[str] | bytes) -> Path:
    path = settings.landing / "events" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{name}.tmp")
    tmp.write_bytes(lines if isinstance(lines, bytes) else "".join(f"{line}\n" for line in lines).encode())
    os.replace(tmp, path)
    return path


def _lines(path: Path) -> int:
    """Non-blank lines, a line ending at \\n, \\r\\n or a lone \\r (counted here independently of the product)."""
    with open_landed(path) as fh:
        return sum(1 for line in re.split(rb"\r\n|\r|\n", fh.read()) if line.strip())


# -- item 3: a run that exits 0 leaves its table caught up -------------------------------------------------------


@pytest.mark.slow
def test_rerun_after_interrupted_batch_also_reads_what_landed_since(spark, fresh_settings):
    s, registry = fresh_settings, crash_registry()
    generate(s.landing, rows=600, files=2, seed=5)
    run_table(spark, s, registry.get("bronze.events"))
    kill_in_child(s, "silver.events", 0, "after")  # silver committed, its checkpoint not
    generate(s.landing, rows=600, files=2, seed=6, start=DEFAULT_START.replace(day=5))
    run_table(spark, s, registry.get("bronze.events"))

    run_table(spark, s, registry.get("silver.events"))

    bronze_files = {r[0] for r in table(spark, s, "bronze.events").select("_source_file").distinct().collect()}
    seen = (
        table(spark, s, "silver.events")
        .select("_source_file")
        .union(table(spark, s, "silver.events_quarantine").select("_source_file"))
    )
    assert {r[0] for r in seen.distinct().collect()} == bronze_files
    assert len(bronze_files) == 4
    again = run_table(spark, s, registry.get("silver.events"))
    assert again.rows_written() == 0 and again.rows_in == 0


# -- item 4: a landed file is never lost in silence -------------------------------------------------------------


def test_file_replaced_after_ingestion_is_refused_by_name(spark, fresh_settings):
    s = fresh_settings
    spec = default_registry().get("bronze.events")
    path = _land_lines(s, "a.json", [_event("e1", "2026-11-01T10:00:00Z")])
    run_table(spark, s, spec)
    time.sleep(0.01)
    _land_lines(s, "a.json", [_event("e2", "2026-11-01T11:00:00Z"), _event("e3", "2026-11-01T12:00:00Z")])
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 5_000_000_000))

    with pytest.raises(
        PipelineError, match=r"landing file .*/a\.json was already ingested \(batch 0\) and has been replaced"
    ):
        run_table(spark, s, spec)
    assert [r.event_id for r in table(spark, s, "bronze.events").collect()] == ["e1"]


def test_same_file_dropped_again_is_harmless(spark, fresh_settings):
    s = fresh_settings
    spec = default_registry().get("bronze.events")
    lines = [_event("e1", "2026-11-01T10:00:00Z"), _event("e2", "2026-11-01T11:00:00Z")]
    path = _land_lines(s, "a.json", lines)
    run_table(spark, s, spec)
    _land_lines(s, "a.json", lines)  # the producer sends the same bytes again
    later = time.time_ns() + 5_000_000_000
    os.utime(path, ns=(later, later))

    again = run_table(spark, s, spec)

    assert again.rows_written() == 0
    assert sorted(r.event_id for r in table(spark, s, "bronze.events").collect()) == ["e1", "e2"]


@pytest.mark.slow
def test_file_gone_after_planning_is_named_then_ingested_once_restored(spark, fresh_settings):
    s, registry = fresh_settings, crash_registry()
    generate(s.landing, rows=300, files=3, seed=7)
    files = sorted((s.landing / "events").glob("*.json"))
    contents = {p: p.read_bytes() for p in files}
    kill_in_child(s, "bronze.events", 0, "before")  # batch 0 planned (one file), nothing written
    planned = [p for p in files if p.name in (s.checkpoint_for("bronze.events") / "sources" / "0" / "0").read_text()]
    assert len(planned) == 1
    planned[0].unlink()

    with pytest.raises(PipelineError, match=rf"landing file .*{planned[0].name} was planned into batch 0.*is gone"):
        run_table(spark, s, registry.get("bronze.events"))

    _land_lines(s, planned[0].name, contents[planned[0]])
    run_table(spark, s, registry.get("bronze.events"))
    per_file = dict(
        table(spark, s, "bronze.events").groupBy(F.element_at(F.split("_source_file", "/"), -1)).count().collect()
    )
    assert per_file == {p.name: _lines(p) for p in files}


def test_file_with_an_old_modification_time_is_still_ingested(spark, fresh_settings):
    s = fresh_settings
    spec = default_registry().get("bronze.events")
    _land_lines(s, "new.json", [_event("e1", "2026-11-01T10:00:00Z")])
    run_table(spark, s, spec)
    old = _land_lines(s, "old.json", [_event("e2", "2026-11-01T11:00:00Z")])
    month_ago = time.time_ns() - 30 * 86_400 * 10**9
    os.utime(old, ns=(month_ago, month_ago))  # e.g. copied with its original time preserved

    run_table(spark, s, spec)

    assert sorted(r.event_id for r in table(spark, s, "bronze.events").collect()) == ["e1", "e2"]


# -- item 5: one writer per table ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_two_cli_runs_at_once_do_not_double_bronze(format_settings):
    s = format_settings
    report = generate(s.landing, rows=2000, files=2, seed=9)
    env = {
        **short_lived(dict(os.environ)),
        "TRIBUTARY_HOME": str(s.home),
        "TRIBUTARY_DRIVER_MEMORY": "1g",
        "TRIBUTARY_TABLE_FORMAT": s.table_format,
    }
    procs = [
        subprocess.Popen(
            [TRIBUTARY, "run", "bronze.events"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    result = run_query(replace(s, catalog_name="tributary"), "SELECT count(*) FROM bronze.events")
    assert result.rows[0][0] == report.lines


def test_second_writer_fails_naming_the_holder(spark, fresh_settings):
    s = replace(fresh_settings, lock_wait_seconds=0)
    generate(s.landing, rows=50, files=1, seed=3)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(s.home), s.catalog_name], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(PipelineError, match=rf"table bronze\.events is being written by pid {holder.pid} on "):
            run_table(spark, s, default_registry().get("bronze.events"))
        assert not spark.catalog.tableExists(f"{s.catalog_name}.bronze.events")
    finally:
        holder.kill()
        holder.wait()


def test_lock_of_a_killed_holder_is_taken_over(fresh_settings):
    s = fresh_settings
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(s.home), s.catalog_name], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    assert holder.stdout.readline().strip() == "locked"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert json.loads(lock_path(s, "bronze.events").read_text())["pid"] == holder.pid  # it left its name behind
    started = time.monotonic()
    with table_lock(s, "bronze.events", wait_seconds=0):
        assert json.loads(lock_path(s, "bronze.events").read_text())["pid"] == os.getpid()
    assert time.monotonic() - started < 1


def test_a_run_that_lost_its_lock_stops_before_its_next_commit(spark, fresh_settings, monkeypatch):
    """The lock ends between two batches (a PostgreSQL lock's connection dropped: `test_postgres_lock` shows the
    lock saying so); the run stops with one line before committing anything of the second batch, and a re-run
    lands every row once."""
    s = fresh_settings
    landed = generate(s.landing, rows=300, files=2, seed=5)
    spec = default_registry().get("bronze.events")
    spec = replace(spec, source=replace(spec.source, max_files_per_trigger=1))
    bronze = f"{s.catalog_name}.bronze.events"

    class LostAfterFirstBatch(locks.FileLock):
        def still_held(self) -> str | None:
            if spark.catalog.tableExists(bronze) and spark.table(bronze).count():
                return "its connection to the catalog database ended: simulated"
            return None

    monkeypatch.setattr(locks, "writer_lock", lambda settings, name: LostAfterFirstBatch(lock_path(settings, name)))
    with pytest.raises(PipelineError) as lost:
        run_table(spark, s, spec)
    assert str(lost.value).startswith("table bronze.events: this run lost its writer lock (its connection to the")
    first = len(landed.files[0].read_text().splitlines())
    assert table(spark, s, "bronze.events").count() == first
    assert table(spark, s, "bronze.events_files").count() == 1  # batch 1's file health was not committed either
    monkeypatch.undo()
    run_table(spark, s, spec)
    assert table(spark, s, "bronze.events").count() == landed.lines
    assert table(spark, s, "bronze.events").select("_source_file").distinct().count() == 2
    assert table(spark, s, "bronze.events_files").count() == 2


_HOLD_LOCK = """
import sys, time
from dataclasses import replace
from pathlib import Path
from infra.settings import Settings
from pipelines.run.locks import table_lock
s = Settings.from_env(home=sys.argv[1]).with_home(Path(sys.argv[1]))
with table_lock(s, "bronze.events", wait_seconds=0):
    print("locked", flush=True)
    time.sleep(600)
"""


# -- items 6-9: values and bytes that must be quarantined, never stop or stall the pipeline ----------------------


def test_year_one_and_year_9999_are_quarantined_and_windows_still_close(spark, format_settings):
    s = format_settings
    generate(s.landing, rows=400, files=1, seed=11)
    _land_lines(s, "bad.json", [_event("ancient", "0001-01-01T00:00:00Z"), _event("future", "9999-12-31T23:59:59Z")])
    names = ["bronze.events", "silver.events", "gold.event_counts_5m"]
    reports = {r.table: r for r in run_pipeline(spark, s, default_registry(), names)}
    run_pipeline(spark, s, default_registry(), names)  # and the next run does not fail either

    quarantined = {
        r.event_id: list(r.reasons)
        for r in table(spark, s, "silver.events_quarantine")
        .filter(F.col("event_id").isin("ancient", "future"))
        .collect()
    }
    assert quarantined == {"ancient": ["event_time_plausible"], "future": ["event_time_plausible"]}
    assert reports["gold.event_counts_5m"].watermark.startswith("2026-11-")
    assert table(spark, s, "gold.event_counts_5m").count() > 0


def test_implausible_time_never_reaches_a_watermark_read_from_bronze(spark, fresh_settings):
    s = fresh_settings
    generate_clickstream(s.landing, impressions=300, files=1, seed=3)
    click = {"click_id": "c-future", "impression_id": "i-x", "user_id": "u1", "event_time": "9999-12-31T23:59:59Z"}
    write_json_lines(s.landing / "clicks", "clicks-future.json", [click])
    registry = default_registry()
    chain = ["bronze.impressions", "silver.products", "silver.impressions", "bronze.clicks", "gold.ad_clicks"]
    report = run_pipeline(spark, s, registry, chain)[-1]

    assert report.watermark.startswith("2026-11-")
    late = table(spark, s, "gold.ad_clicks_late").filter(F.col("record").contains("c-future")).collect()
    assert len(late) == 1 and late[0].event_time.year == 9999
    assert table(spark, s, "gold.ad_clicks").count() > 0


def test_implausible_time_without_a_late_table_is_counted_not_used(spark, fresh_settings):
    s = fresh_settings
    registry = default_registry()
    counts = registry.get("gold.event_counts_5m")
    direct = replace(counts, output=replace(counts.output, name="gold.counts_from_bronze"), expectations=())
    direct = replace(direct, source=TableSource("bronze.events"), transform=event_counts_5m)
    generate(s.landing, rows=300, files=1, seed=12)
    _land_lines(s, "future.json", [_event("future", "9999-12-31T23:59:59Z")])
    run_table(spark, s, registry.get("bronze.events"))

    report = run_table(spark, s, direct)

    assert report.rows_out_of_range == 1
    assert report.watermark.startswith("2026-11-")
    assert table(spark, s, "gold.counts_from_bronze").filter(F.year("window_start") == 9999).count() == 0


def test_bytes_that_are_not_utf8_are_kept_readable(spark, fresh_settings):
    s = fresh_settings
    _land_lines(s, "latin1.json", b'{"event_id":"e1","event_type":"caf\xe9"}\n\xff\xfe{"event_id":"e2"}\n')
    run_pipeline(spark, s, default_registry(), ["bronze.events", "silver.events"])

    rows = run_query(s, "SELECT raw_record FROM silver.events_quarantine ORDER BY raw_record").rows
    assert len(rows) == 2
    assert all("\ufffd" in r[0] for r in rows)
    assert run_query(s, "SELECT count(*) FROM bronze.events WHERE _corrupt_record IS NOT NULL").rows[0][0] == 2


def test_every_landed_line_is_one_bronze_row(spark, format_settings):
    s = format_settings
    array = "[" + ",".join(_event(f"a{i}", "2026-11-01T10:00:00Z") for i in range(3)) + "]"
    _land_lines(s, "array.json", [array, _event("ok1", "2026-11-01T10:00:00Z")])
    noise = os.urandom(2000).replace(b"\n", b"").replace(b"\r", b"")
    garbage = bytes(range(256)) * 4 + b"\n\r\r\n" + b"x" + noise + b"\n"  # (never a line starting like an array)
    _land_lines(s, "garbage.json", garbage)
    _land_lines(
        s,
        "crlf.json",
        f"{_event('c1', '2026-11-01T10:00:00Z')}\r\n\r\n{_event('c2', '2026-11-01T10:00:00Z')}\r\n".encode(),
    )
    run_table(spark, s, default_registry().get("bronze.events"))

    per_file = dict(
        table(spark, s, "bronze.events").groupBy(F.element_at(F.split("_source_file", "/"), -1)).count().collect()
    )
    landed = {p.name: _lines(p) for p in (s.landing / "events").iterdir() if not p.name.startswith(".")}
    assert per_file == landed
    assert (landed["array.json"], landed["crlf.json"], landed["garbage.json"]) == (2, 2, 6)
    arrays = table(spark, s, "bronze.events").filter(F.col("_corrupt_record").startswith("[")).count()
    assert arrays == 1
    valid = {r.event_id for r in table(spark, s, "bronze.events").filter("_corrupt_record IS NULL").collect()}
    assert valid == {"ok1", "c1", "c2"}


def test_gzip_data_named_json_is_refused_by_name(spark, fresh_settings):
    s = fresh_settings
    _land_lines(s, "packed.json", gzip.compress(f"{_event('g1', '2026-11-01T10:00:00Z')}\n".encode()))
    with pytest.raises(
        PipelineError, match=r"landing file .*/packed\.json holds gzip data .*rename it to packed\.json\.gz"
    ):
        run_table(spark, s, default_registry().get("bronze.events"))
    assert not spark.catalog.tableExists(f"{s.catalog_name}.bronze.events")
