"""A batch's few invalid rows are quarantined from the driver (`ValidateDedupeSink._quarantine`): the same rows as
the Spark write, instants unmoved in a Python process far from UTC, and a record sent again quarantined once."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

import pytest
from pyspark.sql import functions as F

from pipelines.datasets import default_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.run.runner import run_table
from pipelines.write import validate
from tests.support.helpers import table

CHAIN = ("bronze.events", "silver.events")


@pytest.fixture
def far_from_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The Python process's local time zone 8 hours behind UTC (Spark's session stays in UTC)."""
    monkeypatch.setenv("TZ", "America/Los_Angeles")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _land_and_run(spark, settings, resend: bool) -> dict[str, int]:
    """Two increments (the second with the first's first file sent again under a new name); the quarantine
    counts of each silver run."""
    registry = default_registry()
    first = generate(settings.landing, rows=900, files=2, seed=61)
    counts = []
    for step in range(2):
        if step == 1:
            generate(settings.landing, rows=300, files=1, seed=62)
            if resend:
                shutil.copy(first.files[0], first.files[0].with_name("events-resent-00000.json"))
        for name in CHAIN:
            report = run_table(spark, settings, registry.get(name))
        counts.append(report.metrics.get("rows_quarantined", 0))
    return {"first": counts[0], "second": counts[1]}


def _quarantined(spark, settings) -> list[tuple]:
    rows = table(spark, settings, "silver.events_quarantine").select(
        "event_id", F.array_sort("reasons"), "raw_record", F.element_at(F.split("_source_file", "/"), -1), "_batch_id"
    )
    return sorted((tuple(r) for r in rows.collect()), key=repr)


def test_few_invalid_rows_quarantined_by_the_driver_equal_the_spark_write(
    spark, fresh_settings, settings_factory, far_from_utc, monkeypatch
):
    # One format: Delta's driver commit is covered by tests/pipelines/io/test_driver_rows.py and, through this
    # sink, by tests/pipelines/run/test_incremental.py.
    driver = fresh_settings
    counts = _land_and_run(spark, driver, resend=True)
    assert 0 < counts["first"] <= validate.DRIVER_QUARANTINE_ROWS and counts["second"] > 0

    by_spark = settings_factory()
    monkeypatch.setattr(validate, "DRIVER_QUARANTINE_ROWS", 0)
    assert _land_and_run(spark, by_spark, resend=True) == counts
    assert _quarantined(spark, driver) == _quarantined(spark, by_spark)

    quarantine = table(spark, driver, "silver.events_quarantine")
    # The resent file's invalid records were already quarantined: each record once.
    assert quarantine.count() == quarantine.select("raw_record").distinct().count() == sum(counts.values())
    # Instants as bronze holds them (the driver did not read them in Los Angeles time).
    bronze = table(spark, driver, "bronze.events").select("_source_file", "_ingested_at").distinct()
    moved = quarantine.join(bronze, ["_source_file", "_ingested_at"], "left_anti")
    assert moved.count() == 0
