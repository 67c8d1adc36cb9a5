"""A table's row expectations are validated on the rows appended since they last passed, and catch what a
validation of the whole table catches."""

from __future__ import annotations

import shutil
from dataclasses import replace

from pyspark.sql import functions as F

from pipelines.authoring.load import load_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io.formats import table_format
from pipelines.run.pipeline import run_pipeline
from pipelines.spec.expectations import not_null, unique
from pipelines.spec.registry import Registry
from pipelines.spec.tables import TableSpec
from quality.gx_runner import validate_table
from quality.results import CheckResult, results_dir, save_result

ECOMMERCE = load_registry(["pipelines.datasets.ecommerce"])
SILVER = ECOMMERCE.get("silver.events")
CHAIN = Registry([ECOMMERCE.get("bronze.events"), SILVER])
APPENDED = "validated on the"
HELD = "held on every row of the"


def _validate(spark, s, spec: TableSpec = SILVER, deep: bool = False) -> dict[str, CheckResult]:
    results = validate_table(spark, s, spec, deep=deep)
    for result in results.values():
        save_result(s, result)
    return results


def _whole(spark, s, spec: TableSpec = SILVER) -> dict[str, CheckResult]:
    """The same validation with no earlier result to start from, every row read by Great Expectations."""
    shutil.rmtree(results_dir(s), ignore_errors=True)
    return _validate(spark, s, spec, deep=True)


def _outcomes(results: dict[str, CheckResult]) -> dict[str, list[tuple]]:
    """Each outcome's numbers, without the notes in parentheses (a freshness note names the time of the check)."""
    return {
        severity: [(o.name, o.success, o.unexpected_count, (o.observed or "").split(" (")[0]) for o in r.outcomes]
        for severity, r in results.items()
    }


def _appended(results: dict[str, CheckResult], note: str = APPENDED) -> bool:
    return any(note in line for r in results.values() for line in r.notes)


def test_row_expectations_on_appended_rows_equal_the_whole_table_and_catch_bad_rows(spark, format_settings):
    s, fmt = format_settings, table_format(format_settings)
    generate(s.landing, rows=1500, files=2, seed=41)
    run_pipeline(spark, s, CHAIN)
    first = _validate(spark, s, deep=True)
    assert not _appended(first) and first["error"].passed, [o.summary() for o in first["error"].failed]

    generate(s.landing, rows=400, files=1, seed=42)
    run_pipeline(spark, s, CHAIN)
    second = _validate(spark, s, deep=True)  # deep: not proven by the commits, so validated on the appended rows
    assert _appended(second) and second["error"].rows_checked == fmt.stats(spark, SILVER.name).rows
    assert _outcomes(second) == _outcomes(_whole(spark, s))

    # A row without user_id appended behind the pipeline: the whole table is validated, for exact counts.
    bad = fmt.read(spark, SILVER.name).limit(1).withColumn("user_id", F.lit(None).cast("string"))
    bad = bad.withColumn("event_id", F.lit("appended-behind-the-pipeline"))
    fmt.append(bad.localCheckpoint(), SILVER.name, writer="test", batch_id=0)
    caught = _validate(spark, s)
    failed = {o.name: o for o in caught["error"].failed}
    assert not _appended(caught) and list(failed) == [not_null("user_id").label]
    assert failed[not_null("user_id").label].unexpected_count == 1
    assert _outcomes(caught) == _outcomes(_whole(spark, s))

    # Only expectations that passed are validated on appended rows: the failed one is counted on the whole table.
    generate(s.landing, rows=200, files=1, seed=43)
    run_pipeline(spark, s, CHAIN)
    still = _validate(spark, s)  # the passed ones proven by the pipeline's commit since the last validation
    assert _appended(still, HELD) and [o.name for o in still["error"].failed] == [not_null("user_id").label]
    assert _outcomes(still) == _outcomes(_whole(spark, s))

    # A key stored before and appended again: unique fails on the whole table, with both copies counted.
    keyed = replace(SILVER, expectations=(unique("event_id"),))
    assert _whole(spark, s, keyed)["error"].passed
    again = fmt.read(spark, SILVER.name).orderBy("event_id").limit(1)
    key = again.first()["event_id"]
    fmt.append(again.localCheckpoint(), SILVER.name, writer="test", batch_id=1)
    doubled = _validate(spark, s, keyed)["error"]
    assert not doubled.passed and doubled.outcomes[0].unexpected_count == 2 and key in doubled.outcomes[0].samples

    # Rows replaced (not appended) since the last pass: everything is validated on the whole table.
    assert _validate(spark, s)["error"].passed is False
    silver = fmt.read(spark, SILVER.name).filter(F.col("user_id").isNotNull() & (F.col("event_id") != key))
    fmt.overwrite(silver.localCheckpoint(), SILVER.name)
    replaced = _validate(spark, s)
    assert not _appended(replaced) and replaced["error"].passed
