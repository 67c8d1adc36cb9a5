"""The pipeline reconciliation counts what was appended since its last passed count, and equals a full count."""

from __future__ import annotations

import shutil
from dataclasses import replace

from pipelines.authoring.load import load_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io.formats import table_format
from pipelines.ops.full_refresh import full_refresh
from pipelines.ops.maintenance.runner import compact_data_files
from pipelines.run.pipeline import run_pipeline
from pipelines.spec.registry import Registry
from pipelines.spec.tables import MaintenancePolicy
from quality.reconcile import pipelines_of, reconcile_pipeline
from quality.results import CheckResult, results_dir, save_result

ECOMMERCE = load_registry(["pipelines.datasets.ecommerce"])
CHAIN = Registry([ECOMMERCE.get("bronze.events"), ECOMMERCE.get("silver.events")])
PIPELINE = pipelines_of(ECOMMERCE)[0]
PIPELINE_TABLES = ("bronze.events", "silver.events", PIPELINE.sink.quarantine_table)
INCREMENTAL = "counted the rows appended since the last reconciliation that passed"


def _reconcile(spark, s) -> CheckResult:
    """The reconciliation counted from the rows (deep), kept as the latest result; the same check read from the
    commits' records, not kept, has the same numbers whenever the pipeline alone wrote the tables."""
    result = reconcile_pipeline(spark, s, PIPELINE, deep=True)
    save_result(s, result)
    return result


def _from_commits(spark, s) -> CheckResult:
    return reconcile_pipeline(spark, s, PIPELINE)


def _read_from_commits(result: CheckResult) -> bool:
    return any("counted from the commits" in note for note in result.notes)


def _full(spark, s) -> CheckResult:
    """The same check counted from scratch (no earlier result to start from)."""
    shutil.rmtree(results_dir(s))
    return _reconcile(spark, s)


def _observed(result: CheckResult) -> list[tuple[str, bool, str | None]]:
    return [(o.name, o.success, o.observed) for o in result.outcomes]


def _incremental(result: CheckResult) -> bool:
    return any(INCREMENTAL in note for note in result.notes)


def test_counts_since_the_last_pass_equal_a_full_count_and_catch_what_a_full_count_catches(spark, format_settings):
    s = format_settings
    generate(s.landing, rows=2000, files=2, seed=31)
    run_pipeline(spark, s, CHAIN)
    first = _reconcile(spark, s)
    assert first.passed and not _incremental(first), [o.summary() for o in first.failed]
    assert _read_from_commits(recorded := _from_commits(spark, s)) and _observed(recorded)[:3] == _observed(first)[:3]

    # New events, and a producer sending a whole file again: valid and rejected lines both come back as duplicates.
    new = generate(s.landing, rows=500, files=1, seed=32)
    sent = sorted((s.landing / "events").glob("*.json"))[0]
    shutil.copy(sent, sent.with_name("resent.json"))
    run_pipeline(spark, s, CHAIN)
    second = _reconcile(spark, s)
    assert second.passed and _incremental(second), [o.summary() for o in second.failed]
    assert _read_from_commits(recorded := _from_commits(spark, s)) and _observed(recorded)[:3] == _observed(second)[:3]
    assert second.state["rows"] == first.state["rows"] + new.lines + len(sent.read_text().splitlines())
    full = _full(spark, s)
    assert not _incremental(full) and _observed(full) == _observed(second)
    assert {k: v for k, v in full.state.items()} == second.state

    # A compaction rewrites bronze's files without changing its rows: the next count still starts from the last.
    policy = replace(MaintenancePolicy(), min_input_files=2)
    assert compact_data_files(spark, s, "bronze.events", policy)["rewritten_data_files_count"] >= 2
    generate(s.landing, rows=300, files=1, seed=33)
    run_pipeline(spark, s, CHAIN)
    third = _reconcile(spark, s)
    assert third.passed and _incremental(third)
    assert _read_from_commits(recorded := _from_commits(spark, s)) and _observed(recorded)[:3] == _observed(third)[:3]
    assert _observed(_full(spark, s)) == _observed(third)

    # A full refresh drops and rebuilds both tables (Delta versions start again at 0): everything is counted again,
    # per file too.
    passed = third
    full_refresh(spark, s, CHAIN, "bronze.events", confirm="bronze.events")
    more = generate(s.landing, rows=100, files=1, seed=34)
    run_pipeline(spark, s, CHAIN)
    rebuilt = _reconcile(spark, s)
    assert rebuilt.passed and not _incremental(rebuilt), [o.summary() for o in rebuilt.failed]
    assert _read_from_commits(recorded := _from_commits(spark, s)) and _observed(recorded)[:3] == _observed(rebuilt)[:3]
    assert rebuilt.state["rows"] == passed.state["rows"] + more.lines
    assert _observed(_full(spark, s)) == _observed(rebuilt)

    # A row appended to silver behind the pipeline doubles a key: the count since the last pass sees it.
    fmt = table_format(s)
    doubled = fmt.read(spark, "silver.events").orderBy("event_id").limit(1)
    key = doubled.first()["event_id"]
    fmt.append(doubled, "silver.events", writer="test", batch_id=0)
    caught = _reconcile(spark, s)
    assert _incremental(caught) and not caught.passed
    # A commit without the batches' record: the check reads the rows instead of trusting the other commits.
    assert not _read_from_commits(recounted := _from_commits(spark, s)) and not recounted.passed
    assert f"2x event_id={key}" in caught.outcomes[3].samples

    # Rows replaced behind the pipeline (not an append): everything is counted again, and the loss is caught.
    silver = fmt.read(spark, "silver.events")
    lost = silver.orderBy("event_id").first()["event_id"]
    fmt.overwrite(silver.filter(silver.event_id != lost).localCheckpoint(), "silver.events")
    after = _reconcile(spark, s)
    assert not _incremental(after) and not after.passed
    assert f"missing event_id={lost}" in after.outcomes[3].samples


def test_counts_read_from_the_commits_go_on_from_the_last_count_after_old_snapshots_are_expired(spark, fresh_settings):
    s, fmt = fresh_settings, table_format(fresh_settings)
    for seed, rows in ((35, 800), (37, 200)):  # two commits before the count: the older one will be expired
        generate(s.landing, rows=rows, files=1, seed=seed)
        run_pipeline(spark, s, CHAIN)
    first = reconcile_pipeline(spark, s, PIPELINE)
    assert first.passed and _read_from_commits(first)
    save_result(s, first)

    generate(s.landing, rows=300, files=1, seed=36)
    sent = sorted((s.landing / "events").glob("*.json"))[0]
    shutil.copy(sent, sent.with_name("resent.json"))  # duplicates and rejected records sent again
    run_pipeline(spark, s, CHAIN)
    # Every snapshot older than those the last count read is expired (as a retention in days would, in time).
    counted_at = dict(zip(("bronze", "silver", "quarantine"), PIPELINE_TABLES, strict=True))
    for key, name in counted_at.items():
        kept = first.state[f"{key}_snapshot"]
        committed = spark.sql(
            f"SELECT committed_at FROM {fmt.qualified(name)}.snapshots WHERE snapshot_id = {kept}"
        ).first()[0]
        spark.sql(
            f"CALL {s.catalog_name}.system.expire_snapshots(table => '{name}', "
            f"older_than => TIMESTAMP '{committed}', retain_last => 1)"
        )
    silver_now = fmt.current_snapshot(spark, "silver.events").snapshot_id
    assert fmt.appended_summaries(spark, "silver.events", None, silver_now) is None  # its first commit is gone

    after = reconcile_pipeline(spark, s, PIPELINE)
    counted = reconcile_pipeline(spark, s, PIPELINE, deep=True)
    assert after.passed and _read_from_commits(after), [o.summary() for o in after.outcomes]
    resent = len(sent.read_text().splitlines())
    assert after.state["rows"] == counted.state["rows"] == first.state["rows"] + 300 + resent
    assert _observed(after)[:3] == _observed(counted)[:3]
