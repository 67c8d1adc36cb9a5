"""Data quality on the real stack: row rules (warn / quarantine / fail), GX suites as blocking and warning Dagster
asset checks, reconciliation that catches lost or doubled rows, and the quality report."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from dagster import (
    AssetCheckSeverity,
    AssetKey,
    AssetSelection,
    DagsterInstance,
    Definitions,
    define_asset_job,
    in_process_executor,
)
from pyspark.sql import functions as F

from infra.errors import PipelineError
from orchestration.assets import build_table_assets
from orchestration.checks import build_asset_checks
from orchestration.cli.main import main as cli_main
from orchestration.resources import SparkResource
from pipelines.authoring.load import load_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.run.pipeline import run_pipeline
from pipelines.run.runner import run_table
from pipelines.run.summary import table_numbers
from pipelines.spec.expectations import between, row_count, unique
from pipelines.spec.registry import Registry
from pipelines.spec.rules import Rule, apply_rules
from quality.gx_runner import validate_table
from quality.inputs import carried_over
from quality.reconcile import pipelines_of, reconcile_pipeline, reconcile_totals
from quality.report import report_path
from quality.results import CheckResult, Outcome, load_results, save_result
from quality.run import check_tables
from tests.support.helpers import table
from tests.support.homes import make_settings

ECOMMERCE = load_registry(["pipelines.datasets.ecommerce"])
BRONZE, SILVER = ECOMMERCE.get("bronze.events"), ECOMMERCE.get("silver.events")
SILVER_RULES = SILVER.sink.rules

GOOD = (
    '{"event_id":"g-1","event_type":"order","event_time":"2026-11-01T10:00:00Z","user_id":"u-1",'
    '"product_id":"p-1","category":"books","quantity":2,"amount":10.50,"currency":"USD"}',
    '{"event_id":"g-2","event_type":"page_view","event_time":"2026-11-01T10:01:00Z","user_id":"u-2",'
    '"product_id":"p-2","category":"toys"}',
    '{"event_id":"g-3","event_type":"cart_add","event_time":"2026-11-01T10:02:00Z","user_id":"u-3",'
    '"product_id":"p-3","category":"home","quantity":5}',
)
# id → (line, the quarantine reasons it must get)
BAD = {
    "b-type": (
        '{"event_id":"b-type","event_type":" Refund ","event_time":"2026-11-01T10:03:00Z","user_id":"u-4"}',
        ["event_type_known"],
    ),
    "b-user": (
        '{"event_id":"b-user","event_type":"page_view","event_time":"2026-11-01T10:04:00Z"}',
        ["user_id_present"],
    ),
    "b-price": (
        '{"event_id":"b-price","event_type":"order","event_time":"2026-11-01T10:05:00Z","user_id":"u-5",'
        '"quantity":0,"amount":3.00,"currency":"USD"}',
        ["order_is_priced"],
    ),
    "b-time": ('{"event_id":"b-time","event_type":"page_view","user_id":"u-6"}', ["event_time_present"]),
}
NO_ID = '{"event_type":"page_view","event_time":"2026-11-01T10:06:00Z","user_id":"u-7"}'
TRUNCATED = '{"event_id":"b-trunc","event_type":"ord'


def _land(settings, name: str, lines: list[str]) -> None:
    folder = settings.landing / "events"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("\n".join(lines) + "\n")


def test_bad_rows_are_quarantined_with_their_reasons_and_good_rows_pass(spark, fresh_settings):
    s = fresh_settings
    lines = [*GOOD, *(line for line, _ in BAD.values()), NO_ID, TRUNCATED, GOOD[0]]  # GOOD[0] twice: a duplicate
    _land(s, "mixed.json", lines)
    run_table(spark, s, BRONZE)
    report = run_table(spark, s, SILVER)

    silver = {r.event_id: r for r in table(spark, s, "silver.events").collect()}
    assert set(silver) == {"g-1", "g-2", "g-3"}
    assert silver["g-1"].amount == pytest.approx(10.5) and silver["g-1"].event_type == "order"

    quarantined = table(spark, s, "silver.events_quarantine").collect()
    assert len(quarantined) == len(BAD) + 2
    by_id = {r.event_id: r for r in quarantined}
    for event_id, (_line, reasons) in BAD.items():
        row = by_id[event_id]
        assert row.reasons == reasons, event_id
        assert row._source_file.endswith("/events/mixed.json")
        assert json.loads(row.raw_record)["event_id"] == event_id
    assert json.loads(by_id["b-type"].raw_record)["event_type"] == " Refund ", "the record as landed, not cleaned"
    no_id = [r for r in quarantined if r.event_id is None and r.raw_record != TRUNCATED]
    assert len(no_id) == 1 and no_id[0].reasons == ["event_id_present"]
    truncated = [r for r in quarantined if r.raw_record == TRUNCATED]
    assert len(truncated) == 1 and truncated[0].reasons[0] == "well_formed"

    numbers = table_numbers(report, "silver.events")
    assert numbers["rows_quarantined"] == len(BAD) + 2 and numbers["duplicates_dropped"] == 1
    expected_failures = {name: 0 for name in (r.name for r in SILVER_RULES)}
    for _, reasons in BAD.values():
        for name in reasons:
            expected_failures[name] += 1
    expected_failures["event_id_present"] += 1  # NO_ID
    for name in truncated[0].reasons:
        expected_failures[name] += 1
    assert {k.removeprefix("rule_failures_"): v for k, v in numbers.items() if k.startswith("rule_failures_")} == (
        expected_failures
    )


def _with_rules(rules: tuple[Rule, ...]):
    """The silver spec with other rules, applied by both its transform and its sink."""

    def transform(df):
        return apply_rules(SILVER.transform(df).drop("_reasons", "_warnings"), rules)

    return replace(SILVER, transform=transform, sink=replace(SILVER.sink, rules=rules))


def test_warn_rule_keeps_and_counts_rows_and_fail_rule_stops_the_run(spark, fresh_settings):
    s = fresh_settings
    _land(s, "a.json", list(GOOD))
    run_table(spark, s, BRONZE)
    warn = Rule("small_basket", "quantity IS NULL OR quantity <= 3", "warn", "baskets over 3 items are unusual")
    fail = Rule("no_test_users", "user_id <> 'u-test'", "fail", "test users must never reach the lakehouse")
    spec = _with_rules((*SILVER_RULES, warn, fail))
    report = run_table(spark, s, spec)
    numbers = table_numbers(report, "silver.events")
    assert table(spark, s, "silver.events").count() == len(GOOD), "warned rows are kept"
    assert numbers["rule_failures_small_basket"] == 1 and numbers["rows_with_warnings"] == 1  # g-3: quantity 5
    assert numbers["rule_failures_no_test_users"] == 0

    test_user = GOOD[1].replace('"g-2"', '"t-1"').replace('"u-2"', '"u-test"')
    _land(s, "b.json", [GOOD[0].replace('"g-1"', '"g-9"'), test_user])
    run_table(spark, s, BRONZE)
    with pytest.raises(PipelineError) as failure:
        run_table(spark, s, spec)
    message = str(failure.value)
    assert "no_test_users" in message and "b.json" in message and "t-1" in message
    assert table(spark, s, "silver.events").count() == len(GOOD), "nothing of the failing batch is written"


def test_reconciliation_and_suites_catch_rows_changed_behind_the_pipeline(spark, fresh_settings):
    s = fresh_settings
    generate(s.landing, rows=2000, files=3, seed=5)
    run_pipeline(spark, s, Registry([BRONZE, SILVER, ECOMMERCE.get("gold.daily_revenue")]))
    results = {
        (r.table, r.check): r for r in check_tables(spark, s, ECOMMERCE, ["silver.events", "gold.daily_revenue"])
    }
    failing = {k: [o.summary() for o in r.failed] for k, r in results.items() if not r.passed}
    # Demo events are from November 1-3, so only the freshness warning may fail.
    assert set(failing) <= {("silver.events", "expectations_warn")}, failing
    assert [o.name for o in results["silver.events", "expectations_warn"].failed] == ["newest event_time within 1 day"]
    assert results["silver.events", "reconciliation"].passed and results["gold.daily_revenue", "reconciliation"].passed
    assert all(r.inputs and r.carried_over_at is None for r in results.values())

    # Nothing changed: every result is carried over, not re-run (a failed freshness check stays failed).
    again = {(r.table, r.check): r for r in check_tables(spark, s, ECOMMERCE, ["silver.events", "gold.daily_revenue"])}
    assert sorted(k for k, r in again.items() if r.carried_over_at is None) == []
    assert {k: r.outcomes for k, r in again.items()} == {k: r.outcomes for k, r in results.items()}

    # A table created but never written (nothing landed for it) is carried over too, and without Spark.
    clicks = load_registry(["pipelines.datasets.clickstream"]).get("bronze.clicks")
    assert run_table(spark, s, clicks).rows_in == 0
    empty = validate_table(spark, s, clicks)["error"]
    assert empty.inputs[f"snapshot:{clicks.name}"] == "none" and empty.carried_over_at is None
    save_result(s, empty)
    assert validate_table(None, s, clicks)["error"].carried_over_at is not None

    fmt_silver = f"{s.catalog_name}.silver.events"
    lost, doubled = [r.event_id for r in spark.table(fmt_silver).orderBy("event_id").limit(2).collect()]
    spark.sql(f"DELETE FROM {fmt_silver} WHERE event_id = '{lost}'")
    pipeline = pipelines_of(ECOMMERCE)[0]
    after_delete = reconcile_pipeline(spark, s, pipeline)
    assert not after_delete.passed and after_delete.carried_over_at is None
    balance = after_delete.outcomes[1]
    assert not balance.success and balance.unexpected_count == 1 and "1 rows lost" in balance.observed
    assert f"missing event_id={lost}" in after_delete.outcomes[3].samples

    spark.table(fmt_silver).filter(F.col("event_id") == doubled).writeTo(fmt_silver).append()
    after_double = reconcile_pipeline(spark, s, pipeline)
    assert f"2x event_id={doubled}" in after_double.outcomes[3].samples
    suite = validate_table(spark, s, replace(SILVER, expectations=(unique("event_id"),)))["error"]
    assert not suite.passed and suite.outcomes[0].unexpected_count == 2 and doubled in suite.outcomes[0].samples

    # Landing a file after the run is pending work, not a loss.
    generate(s.landing, rows=100, files=1, seed=6)
    pending = reconcile_pipeline(spark, s, pipeline)
    assert pending.outcomes[0].success and any("pending" in n for n in pending.notes)

    gold = f"{s.catalog_name}.gold.daily_revenue"
    spark.sql(f"UPDATE {gold} SET revenue = revenue + 1 WHERE currency = 'EUR'")
    eur_keys = spark.table(gold).filter("currency = 'EUR'").count()
    totals = reconcile_totals(spark, s, ECOMMERCE.get("gold.daily_revenue"))
    assert not totals.passed and totals.outcomes[0].unexpected_count == eur_keys > 0
    assert all("EUR" in sample and "revenue" in sample for sample in totals.outcomes[0].samples)
    spark.table(gold).filter("currency = 'USD'").limit(1).writeTo(gold).append()  # a doubled gold row
    doubled_gold = reconcile_totals(spark, s, ECOMMERCE.get("gold.daily_revenue"))
    assert doubled_gold.outcomes[0].unexpected_count == eur_keys + 1


def test_a_result_is_carried_over_only_for_the_same_inputs_and_a_passed_freshness_while_it_holds(tmp_path):
    s = make_settings(tmp_path)
    fresh, rows = "newest event_time within 1 day", "row count at least 1"
    clock = {fresh: timedelta(days=1)}
    inputs = {"suite": "a", "snapshot:silver.events": "7"}

    def saved(fresh_ok: bool, newest: datetime | None = None) -> None:
        observed = f"{newest.isoformat()} (newest event_time must be at or after ...)" if newest else None
        outcomes = [Outcome(rows, "warn", True), Outcome(fresh, "warn", fresh_ok, observed=observed)]
        save_result(s, CheckResult("silver.events", "expectations_warn", "warn", "t0", 1.5, outcomes, inputs=inputs))

    saved(fresh_ok=False)
    carried = carried_over(s, "silver.events", "expectations_warn", dict(inputs), clock)
    assert carried is not None and carried.carried_over_at and carried.checked_at == "t0" and carried.seconds == 1.5
    assert carried_over(s, "silver.events", "expectations_warn", {**inputs, "snapshot:silver.events": "8"}) is None
    assert carried_over(s, "silver.events", "expectations", inputs) is None  # never checked
    now = datetime.now(UTC).astimezone().replace(tzinfo=None)  # as Spark returns timestamps: naive local
    saved(fresh_ok=True, newest=now - timedelta(hours=2))  # the same newest value passes for 22 more hours
    assert carried_over(s, "silver.events", "expectations_warn", dict(inputs), clock) is not None
    saved(fresh_ok=True, newest=now - timedelta(days=1, minutes=1))  # time alone has failed it since
    assert carried_over(s, "silver.events", "expectations_warn", dict(inputs), clock) is None
    saved(fresh_ok=True)  # no newest value on record: checked again
    assert carried_over(s, "silver.events", "expectations_warn", dict(inputs), clock) is None
    assert carried_over(s, "silver.events", "expectations_warn", dict(inputs)) is not None


def test_quality_report_is_written_from_the_persisted_results(spark, fresh_settings):
    s = fresh_settings
    _land(s, "a.json", list(GOOD))
    run_table(spark, s, BRONZE)
    run_table(spark, s, SILVER)
    with pytest.raises(PipelineError, match=r"gold\.daily_revenue does not exist yet"):
        check_tables(spark, s, ECOMMERCE, ["gold.daily_revenue"])
    spec = replace(SILVER, expectations=(between("quantity", 1, 3, severity="warn"), row_count(min_rows=1)))
    for result in validate_table(spark, s, spec).values():
        save_result(s, result)
    assert cli_main(["--home", str(s.home), "quality", "report"]) == 0
    text = report_path(s).read_text()
    assert "silver.events" in text and "quantity between 1 and 3" in text and "**fail**" in text
    warn = next(r for r in load_results(s) if r.check == "expectations_warn")
    assert warn.outcomes[0].unexpected_count == 1 and warn.outcomes[0].samples == [5]

    # `quality check --deep` reads every row; without it the reconciliation reads what the batches recorded.
    for deep, from_commits in ((True, False), (False, True)):
        check_tables(spark, s, ECOMMERCE, ["silver.events"], deep=deep)
        reconciliation = next(r for r in load_results(s) if r.check == "reconciliation")
        assert any("counted from the commits" in n for n in reconciliation.notes) is from_commits
        assert reconciliation.inputs["counted"] == ("commits" if from_commits else "rows")


@pytest.mark.slow
def test_blocking_check_stops_downstream_and_warning_check_does_not(spark, fresh_settings):
    s = fresh_settings
    generate(s.landing, rows=1500, files=2, seed=3)
    specs = []
    for spec in ECOMMERCE:
        if spec.name == "bronze.events":  # a warning that fails: bronze has more than 10 rows
            spec = replace(spec, expectations=(row_count(max_rows=10, severity="warn"),))
        elif spec.name == "silver.events":  # an error that fails: generated quantities go up to 5
            spec = replace(spec, expectations=(between("quantity", 1, 3),))
        specs.append(spec)
    registry = Registry(specs)
    job = define_asset_job("quality_test", selection=AssetSelection.all(), executor_def=in_process_executor)
    defs = Definitions(
        assets=build_table_assets(registry),
        asset_checks=build_asset_checks(registry),
        jobs=[job],
        resources={"spark": SparkResource(home=str(s.home), catalog_name=s.catalog_name)},
    )
    with DagsterInstance.ephemeral() as instance:
        result = defs.resolve_job_def("quality_test").execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    failed_steps = {e.step_key for e in result.all_events if e.event_type_value == "STEP_FAILURE"}
    assert failed_steps == {"silver__events__expectations"}, "only the blocking check fails; gold is skipped"
    materialized = {".".join(e.asset_key.path) for e in result.get_asset_materialization_events()}
    assert materialized == {"bronze.events", "bronze.events_files", "silver.events", "silver.events_quarantine"}

    checks = {(".".join(e.asset_key.path), e.check_name): e for e in result.get_asset_check_evaluations()}
    bronze_warn = checks["bronze.events", "expectations_warn"]
    assert not bronze_warn.passed and bronze_warn.severity == AssetCheckSeverity.WARN
    silver_error = checks["silver.events", "expectations"]
    assert not silver_error.passed and silver_error.severity == AssetCheckSeverity.ERROR
    meta = {k: v.value for k, v in silver_error.metadata.items()}
    too_big = table(spark, s, "silver.events").filter("quantity > 3")
    assert meta["expectations_evaluated"] == 1 and meta["expectations_failed"] == 1
    assert meta["unexpected_count_quantity_between_1_and_3"] == too_big.count() > 0
    samples = meta["samples"]["quantity between 1 and 3"]
    assert 0 < len(samples) <= 20 and set(samples) <= {4, 5}
    assert meta["gx_version"] == "1.24.1"
    assert checks["silver.events", "reconciliation"].passed
    assert not any(table == "gold.daily_revenue" for table, _ in checks)

    silver_numbers = result.asset_materializations_for_node("silver__events")
    silver_meta = next(m for m in silver_numbers if m.asset_key == AssetKey(["silver", "events"])).metadata
    assert silver_meta["rule_failures_well_formed"].value > 0
    assert "silver.events" in report_path(s).read_text()
