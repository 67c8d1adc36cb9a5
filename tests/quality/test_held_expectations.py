"""Row expectations a validating writer proves in its commits: a check reads them instead of the rows, and what
a writer could not prove is counted by Great Expectations, exactly as a validation of every row counts it."""

from __future__ import annotations

import json

from pyspark.sql import Row

from pipelines.authoring.load import load_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io.formats import table_format
from pipelines.run.pipeline import run_pipeline
from pipelines.spec.expectations import Expectation
from pipelines.spec.held import countable, fingerprint, held_in, violation
from pipelines.spec.registry import Registry
from quality.gx_runner import validate_table
from quality.reconcile import pipelines_of, reconcile_pipeline
from tests.support.helpers import land_files

ECOMMERCE = load_registry(["pipelines.datasets.ecommerce"])
SILVER = ECOMMERCE.get("silver.events")
CHAIN = Registry([ECOMMERCE.get("bronze.events"), SILVER])
HELD = "held on every row of the"


def _by_label(label: str):
    return next(e for e in SILVER.expectations if e.label == label)


def _outcomes(results) -> dict[str, list[tuple]]:
    return {
        severity: [(o.name, o.success, o.unexpected_count, (o.observed or "").split(" (")[0]) for o in r.outcomes]
        for severity, r in results.items()
    }


def test_a_writer_proves_what_its_rows_meet_and_a_check_counts_only_what_it_could_not(spark, format_settings):
    s, fmt = format_settings, table_format(format_settings)
    generate(s.landing, rows=600, files=1, seed=51)
    # Two valid page views (the rules only judge an order's currency and quantity) that a warning expectation
    # does not accept each: a currency outside the set, a quantity above 1000.
    line = json.loads(next((s.landing / "events").glob("*.json")).read_text().splitlines()[0])
    odd = [
        {**line, "event_id": "odd-currency", "event_type": "page_view", "currency": "XXX"},
        {**line, "event_id": "odd-quantity", "event_type": "page_view", "quantity": 5000},
    ]
    land_files(s.landing / "events", {"odd.json": "".join(json.dumps(r) + "\n" for r in odd).encode()})
    run_pipeline(spark, s, CHAIN)

    snapshot = fmt.current_snapshot(spark, SILVER.name).snapshot_id
    (commit,) = fmt.appended_summaries(spark, SILVER.name, None, snapshot)
    held = held_in(commit)
    currency, quantity = _by_label("currency in {USD, EUR, GBP}"), _by_label("quantity between 1 and 1000")
    assert fingerprint(currency) not in held and fingerprint(quantity) not in held
    proven = {e.label for e in SILVER.expectations if fingerprint(e) in held}
    assert proven == {
        "event_id unique",
        "event_id not null",
        "event_time not null",
        "event_date not null",
        "user_id not null",
        "event_type in {page_view, cart_add, cart_remove, order}",
        "amount >= 0",
    }

    results = validate_table(spark, s, SILVER)
    every_row = validate_table(spark, s, SILVER, deep=True)
    assert all(any(HELD in n for n in r.notes) for r in results.values())
    assert not any(HELD in n for r in every_row.values() for n in r.notes)
    assert _outcomes(results) == _outcomes(every_row)
    failed = {o.name: o.unexpected_count for o in results["warn"].failed}
    assert failed == {currency.label: 1, quantity.label: 1, "newest event_time within 1 day": None}
    assert results["error"].passed and results["error"].rows_checked == fmt.stats(spark, SILVER.name).rows

    (pipeline,) = pipelines_of(CHAIN)
    from_commits, counted = reconcile_pipeline(spark, s, pipeline), reconcile_pipeline(spark, s, pipeline, deep=True)
    assert any("counted from the commits" in n for n in from_commits.notes)
    assert not any("counted from the commits" in n for n in counted.notes)
    assert from_commits.passed and [o.observed for o in from_commits.outcomes[:3]] == [
        o.observed for o in counted.outcomes[:3]
    ]


def test_only_a_clearly_accepted_value_counts_as_meeting_an_expectation(spark):
    """A missing value fails not_null only; a comparison that is not clearly true counts as failing, so a count
    of zero is a proof. Expectations that allow failing rows, and kinds a batch cannot judge alone, are not
    counted by a writer."""
    rows = spark.createDataFrame([(None, None, "a"), (5, 2.0, "b"), (1001, None, None)], "q int, x double, c string")
    failing = {
        Expectation("between", ("q",), min_value=1, max_value=1000): 1,
        Expectation("in_set", ("c",), values=("a",)): 1,
        Expectation("not_null", ("x",)): 2,
    }
    assert {e.kind: rows.filter(violation(e)).count() for e in failing} == {e.kind: n for e, n in failing.items()}
    assert all(countable(e, rows.columns) for e in failing)
    assert not countable(Expectation("not_null", ("x",), mostly=0.9), rows.columns)
    assert not countable(Expectation("unique", ("q",)), rows.columns)
    assert not countable(Expectation("not_null", ("missing",)), rows.columns)


def test_unique_keys_are_held_only_when_every_valid_row_has_its_whole_key():
    """A key with a missing part never equals a stored key, so the write could store it twice: not proven then."""
    sink, expectations = SILVER.sink, SILVER.expectations
    unique_key = fingerprint(_by_label("event_id unique"))
    every_counted = {f"expect:{i}": 0 for i, e in enumerate(expectations) if countable(e, SILVER.output.schema.names)}
    assert unique_key in sink.held(Row(**every_counted, null_keys=0), expectations)
    assert unique_key not in sink.held(Row(**every_counted, null_keys=1), expectations)
    some_failed = {**every_counted, next(iter(every_counted)): 2}
    assert len(sink.held(Row(**some_failed, null_keys=0), expectations)) == len(every_counted)  # one less, + unique
