"""The rows a run's live progress line shows are the rows its report will count, not Spark's count of reads."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

from pipelines.datasets import default_registry
from pipelines.sources import file_health
from pipelines.sources.kinds import kind_of
from pipelines.write.sinks import ROWS_IN


def _spec(name: str):
    return next(spec for spec in default_registry() if spec.name == name)


def test_a_validating_table_shows_the_rows_its_sink_counted():
    spec = _spec("silver.events")
    # The sink read each batch three times (its counting pass, the valid rows, their keys): Spark counted 3,000.
    run = SimpleNamespace(spec=spec, metrics=Counter({ROWS_IN: 1000}))
    assert kind_of(spec.source).rows_so_far(run, [{"numInputRows": 1800}, {"numInputRows": 1200}]) == 1000


def test_a_table_whose_sink_counts_nothing_shows_the_querys_own_count():
    spec = _spec("gold.event_counts_5m")
    run = SimpleNamespace(spec=spec, metrics=Counter())
    assert kind_of(spec.source).rows_so_far(run, [{"numInputRows": 300}, {"numInputRows": 200}]) == 500


def test_a_landing_table_shows_its_landed_records_not_the_lines_spark_read():
    spec = _spec("bronze.events")
    run = SimpleNamespace(spec=spec, metrics=Counter({file_health.LANDED_ROWS: 900}))
    assert kind_of(spec.source).rows_so_far(run, [{"numInputRows": 1000}]) == 900
