"""Exactly-once incremental runs on the real stack: no-op re-runs, new files, reconciliation, gold vs reference."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pipelines.datasets import default_registry
from pipelines.datasets.clickstream.sample_data import generate_clickstream
from pipelines.datasets.ecommerce.sample_data import DEFAULT_START, generate
from pipelines.ops.maintenance.runner import compact_data_files
from pipelines.run.pipeline import run_pipeline
from pipelines.run.runner import run_table
from pipelines.spec.tables import MaintenancePolicy
from tests.support.helpers import compiled_classes, current_snapshots, table
from tests.support.reference import classify, load_landing


def _run(spark, settings):
    return {r.table: r for r in run_pipeline(spark, settings, default_registry())}


def _counts(spark, settings) -> dict[str, int]:
    names = ["bronze.events", "silver.events", "silver.events_quarantine"]
    return {n: table(spark, settings, n).count() for n in names}


def _offsets(settings) -> dict[str, int]:
    """Batches each table's stream has planned: a query that starts and finds nothing still writes none."""
    root = settings.home / "checkpoints"
    return {str(p.parent.relative_to(root)): len(list(p.iterdir())) for p in root.glob("*/*/offsets")}


def test_rerun_without_new_files_writes_nothing(spark, format_settings):
    s = format_settings
    generate(s.landing, rows=3000, files=3, seed=11)
    generate_clickstream(s.landing, impressions=400, files=2, seed=12)
    _run(spark, s)
    generate(s.landing, rows=300, files=1, seed=14)  # a second bronze commit, for the compaction below
    _run(spark, s)
    before, counts, offsets = current_snapshots(spark, s), _counts(spark, s), _offsets(s)
    reports = _run(spark, s)
    assert current_snapshots(spark, s) == before, "a no-op run must not commit"
    assert _counts(spark, s) == counts
    assert all(r.rows_in == 0 for r in reports.values())
    assert all(r.rows_written(t) == 0 for r in reports.values() for t in r.tables)
    # Nothing new anywhere, and every watermarked query ran its last no-data batch: no stream is even started.
    assert [name for name, r in reports.items() if not r.skipped] == []
    assert _offsets(s) == offsets
    assert reports["silver.events"].tables["silver.events"].rows == counts["silver.events"]  # stats from metadata

    # A compaction commits a replace snapshot (Delta: an OPTIMIZE with dataChange=false): same rows, new files,
    # still nothing for silver to read.
    policy = replace(MaintenancePolicy(), min_input_files=2)
    assert compact_data_files(spark, s, "bronze.events", policy)["rewritten_data_files_count"] >= 2
    assert run_table(spark, s, default_registry().get("silver.events")).skipped

    # One new file: its stream runs, and the tables downstream of it read exactly its rows.
    more = generate(s.landing, rows=200, files=1, seed=13)
    reports = _run(spark, s)
    ran = {name for name, r in reports.items() if not r.skipped}
    assert {"bronze.events", "silver.events", "gold.daily_revenue"} <= ran
    assert not ran & {"bronze.impressions", "silver.impressions", "gold.ad_clicks"}
    assert reports["bronze.events"].rows_in == more.lines
    assert _counts(spark, s)["bronze.events"] == counts["bronze.events"] + more.lines


def test_new_files_add_exactly_their_rows_and_resent_duplicates_are_dropped(spark, format_settings):
    s = format_settings
    generate(s.landing, rows=3000, files=3, seed=21)
    first = _run(spark, s)
    assert first["bronze.events"].rows_in == 3000

    # Later files: a fresh batch of events plus a producer re-sending 40 lines it already sent.
    second = generate(s.landing, rows=1000, files=2, seed=22)
    old_lines = (s.landing / "events" / "events-s21-00000.json").read_text().splitlines()
    good_old = [line for line in old_lines if '"event_id":"ev-' in line and line.endswith("}")][:40]
    (s.landing / "events" / "events-resend-00000.json").write_text("\n".join(good_old) + "\n")
    reports = _run(spark, s)

    assert reports["bronze.events"].rows_in == second.lines + len(good_old)
    ref = classify(load_landing(s.landing))
    counts = _counts(spark, s)
    assert counts["bronze.events"] == ref.landed == 3000 + second.lines + len(good_old)
    assert counts["silver.events"] == len(ref.valid_events)
    assert counts["silver.events_quarantine"] == ref.corrupt + ref.invalid
    # Every re-sent line was dropped as a duplicate in this run.
    assert reports["silver.events"].metrics["duplicates_dropped"] >= len(good_old)
    # Reconciliation: bronze = silver + quarantine + duplicates dropped, summed over both runs.
    dupes = sum(r["silver.events"].metrics.get("duplicates_dropped", 0) for r in (first, reports))
    assert counts["bronze.events"] == counts["silver.events"] + counts["silver.events_quarantine"] + dupes
    assert dupes == ref.duplicates
    silver = table(spark, s, "silver.events")
    assert silver.groupBy("event_id").count().filter("count > 1").count() == 0


def test_gold_equals_independent_computation(spark, format_settings):
    s = format_settings
    generate(s.landing, rows=4000, files=4, seed=31, days=2)
    first = _run(spark, s)
    # The next day's files: new events, ~3% of them late (some behind the watermark of the first run).
    generate(s.landing, rows=1500, files=2, seed=32, days=1, start=DEFAULT_START + timedelta(days=2))
    second = _run(spark, s)
    ref = classify(load_landing(s.landing))

    gold = {
        (r.event_date, r.category, r.currency): (r.orders, r.units, r.revenue)
        for r in table(spark, s, "gold.daily_revenue").collect()
    }
    assert gold == ref.daily_revenue()

    # Append mode: only windows the watermark has passed are written, each once.
    watermark = datetime.fromisoformat(second["gold.event_counts_5m"].watermark.replace("Z", "+00:00"))
    got = {
        (r.window_start.replace(tzinfo=UTC), r.event_type): r.events
        for r in table(spark, s, "gold.event_counts_5m").collect()
    }
    assert all(start + timedelta(minutes=5) <= watermark for start, _ in got)
    expected = {k: v for k, v in ref.event_counts_5m().items() if k[0] + timedelta(minutes=5) <= watermark}
    assert set(got) <= set(expected)
    assert all(got[k] <= expected[k] for k in got)
    # Rows that arrived behind the watermark are the only difference, and they are counted.
    dropped = sum(r["gold.event_counts_5m"].rows_dropped_by_watermark for r in (first, second))
    assert sum(expected.values()) - sum(got.values()) == dropped
    assert dropped > 0, "the late events of the second day should include some behind the watermark"


def test_landing_paths_are_reported_in_lineage(spark, fresh_settings):
    s = fresh_settings
    report = generate(s.landing, rows=500, files=2, seed=41)
    _run(spark, s)
    files = {r._source_file for r in table(spark, s, "bronze.events").select("_source_file").distinct().collect()}
    assert {Path(f.replace("file:", "")).name for f in files} == {p.name for p in report.files}


def test_a_second_increment_of_the_same_shape_compiles_only_the_plans_its_values_change(spark, fresh_settings):
    """Spark's generated-code cache holds every plan of an increment through the events chain (the default 100
    entries did not: each increment compiled about 145 classes again); what is compiled again is only the
    code that inlines a value of the batch (its id, the ingestion time)."""
    s = fresh_settings
    chain = [default_registry().get(name) for name in ("bronze.events", "silver.events", "gold.daily_revenue")]
    generate(s.landing, rows=500, files=1, seed=31)
    for seed in (32, 33, 34):
        generate(s.landing, rows=100, files=1, seed=seed)
        before = compiled_classes(spark)
        reports = [run_table(spark, s, spec) for spec in chain]
        compiled = compiled_classes(spark) - before
        assert [r.skipped for r in reports] == [False] * len(chain)
    assert compiled <= 12, f"the third increment compiled {compiled} classes"
