"""Late rows: the platform diverts exactly the rows plain Spark drops, and says why a query cannot stream.

Four textbook queries (tumbling, sliding in update mode, session windows, a stream-stream join; watermark one
hour) are declared as tables and fed three drops with out-of-order and late events, rows on the watermark's
edges, and a last event far ahead that closes every other window. Plain Spark runs the same functions on the
same files in the same three steps (availableNow); the reference adds `collect_list(event_id)` to each window
so the test knows which rows Spark counted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from infra.errors import ConfigError
from infra.settings import Settings
from pipelines.authoring.load import load_registry
from pipelines.run.pipeline import run_pipeline
from pipelines.sources.report import RunReport
from tests.support import textbook_queries as q
from tests.support.helpers import table
from tests.support.homes import make_settings
from tests.support.packages import write_package

TABLES = """
import pipelines.authoring as tb
from tests.support import textbook_queries as q

LATE = {"watermark": tb.watermark("event_time", q.DELAY), "late": True}
tb.landing("bronze.events", tb.files("events", "json", tb.schema(q.EVENT)))
tb.landing("bronze.clicks", tb.files("clicks", "json", tb.schema(q.CLICK)))


@tb.gold(keys=("window_start", "event_type"), **LATE)
def events_5m(bronze_events):
    "Tumbling windows, append."
    return q.tumbling(bronze_events)


@tb.gold(write=tb.upsert("window_start", "product_id"), **LATE)
def product_avg_10m(bronze_events):
    "Sliding windows, update mode."
    return q.sliding(bronze_events)


@tb.gold(keys=("user_id", "window_start"), **LATE)
def user_sessions(bronze_events):
    "Session windows, append."
    return q.sessions(bronze_events)


@tb.gold(keys="click_id", **LATE)
def clicks_attributed(bronze_events, bronze_clicks):
    "Stream-stream join, append."
    return q.attributed(bronze_events, bronze_clicks)
"""
WINDOWED = {"gold.events_5m": q.tumbling, "gold.product_avg_10m": q.sliding, "gold.user_sessions": q.sessions}
JOIN = "gold.clicks_attributed"


@dataclass
class Reference:
    """Plain Spark running the same queries on the landing folders, one availableNow step per drop."""

    spark: SparkSession
    landing: Path
    root: Path
    rows: dict[str, list[Any]] = field(default_factory=dict)
    upserted: dict[tuple, Any] = field(default_factory=dict)
    join_dropped: int = 0

    def _stream(self, folder: str, schema: str) -> DataFrame:
        df = self.spark.readStream.schema(schema).json(str(self.landing / folder))
        return df.withWatermark("event_time", q.DELAY)

    def step(self) -> None:
        events, clicks = self._stream("events", q.EVENT), self._stream("clicks", q.CLICK)
        ids = F.collect_list("event_id").alias("ids")
        queries = {
            "gold.events_5m": (q.tumbling(events, ids), "append"),
            "gold.product_avg_10m": (q.sliding(events, ids), "update"),
            "gold.user_sessions": (q.sessions(events, ids), "append"),
            JOIN: (q.attributed(events, clicks), "append"),
        }
        started = {name: self._start(name, df, mode) for name, (df, mode) in queries.items()}
        for name, query in started.items():
            query.awaitTermination()
            if name == JOIN:  # a join drops input rows, so its count is one per row
                progress = query.recentProgress
                self.join_dropped += sum(
                    op["numRowsDroppedByWatermark"] for p in progress for op in p["stateOperators"]
                )

    def _start(self, name: str, df: DataFrame, mode: str) -> Any:
        def collect(batch: DataFrame, _batch_id: int) -> None:
            got = batch.collect()
            if mode == "update":
                self.upserted.update({(r.window_start, r.product_id): r for r in got})
            else:
                self.rows.setdefault(name, []).extend(got)

        writer = df.writeStream.outputMode(mode).foreachBatch(collect).trigger(availableNow=True)
        return writer.option("checkpointLocation", str(self.root / name)).start()

    def result(self, name: str) -> list[Any]:
        return list(self.upserted.values()) if name == "gold.product_avg_10m" else self.rows.get(name, [])


@dataclass
class Lake:
    settings: Settings
    drops: list[q.Drop]
    reference: Reference
    reports: list[dict[str, RunReport]]


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory) -> Lake:
    settings = make_settings(tmp_path_factory.mktemp("late-rows"))
    package = write_package(tmp_path_factory.mktemp("late-packages"), "latecomers", {"tables.py": TABLES})
    registry = load_registry([package])
    reference = Reference(spark, settings.landing, tmp_path_factory.mktemp("late-reference"))
    drops, reports = q.make_drops(), []
    for index, drop in enumerate(drops):
        q.write_drop(settings.landing, index, drop)
        reports.append({r.table: r for r in run_pipeline(spark, settings, registry)})
        reference.step()
    return Lake(settings, drops, reference, reports)


def _comparable(rows: list[Any], columns: list[str]) -> list[tuple]:
    return sorted(tuple(round(r[c], 9) if isinstance(r[c], float) else r[c] for c in columns) for r in rows)


def _late_ids(spark, settings: Settings, name: str, source: str = "bronze.events") -> list[str]:
    late = table(spark, settings, f"{name}_late").filter(F.col("source") == source).collect()
    key = "event_id" if source == "bronze.events" else "click_id"
    return sorted(json.loads(r.record)[key] for r in late)


def test_each_query_equals_plain_spark_on_the_same_drops(spark, lake):
    for name in (*WINDOWED, JOIN):
        expected = lake.reference.result(name)
        columns = [c for c in expected[0].asDict() if c != "ids"]
        got = table(spark, lake.settings, name).collect()
        assert _comparable(got, columns) == _comparable(expected, columns), name
    assert len(lake.reference.result(JOIN)) > 100


def test_late_tables_hold_exactly_the_rows_no_window_of_spark_counted(spark, lake):
    landed = {e["event_id"]: e for d in lake.drops for e in d.events}
    for name in WINDOWED:
        counted = {i for r in lake.reference.result(name) for i in r.ids}
        expected = sorted(set(landed) - counted - {"e-closer"})  # the closer's own window is still open
        assert _late_ids(spark, lake.settings, name) == expected, name
        assert expected, f"{name}: the drops must bring rows Spark drops"
        reports = [run[name] for run in lake.reports]
        assert sum(r.rows_in for r in reports) == len(landed)
        assert sum(r.metrics.get("rows_late", 0) for r in reports) == len(expected)
    # Rows behind the watermark that Spark still counted: a per-row rule would have diverted them.
    behind = dict.fromkeys(WINDOWED, 0)
    for k, drop in enumerate(lake.drops[1:], start=1):
        watermark = q.iso(q.watermark_before(k))
        for name in behind:
            counted = {i for r in lake.reference.result(name) for i in r.ids}
            behind[name] += sum(1 for e in drop.events if e["event_time"] < watermark and e["event_id"] in counted)
    assert all(n > 0 for n in behind.values()), behind


def test_join_late_rows_are_those_spark_drops(spark, lake):
    events = _late_ids(spark, lake.settings, JOIN, "bronze.events")
    clicks = _late_ids(spark, lake.settings, JOIN, "bronze.clicks")
    assert len(events) + len(clicks) == lake.reference.join_dropped > 0
    matched = lake.reference.result(JOIN)
    assert not set(events) & {r.event_id for r in matched}
    assert not set(clicks) & {r.click_id for r in matched}
    edges = {q.iso(q.watermark_before(k)) for k in (1, 2)}
    at_watermark = {c["click_id"] for d in lake.drops for c in d.clicks if c["event_time"] in edges}
    assert at_watermark and at_watermark <= set(clicks), "a click at the watermark is dropped (<=)"


def test_spark_drops_nothing_the_platform_did_not_divert(lake):
    for run in lake.reports:
        for name in ("gold.events_5m", "gold.user_sessions", JOIN):
            assert run[name].rows_dropped_by_watermark == 0, name


def _refusal(spark, settings: Settings, package: str, body: str, **decorator: str) -> str:
    write_package(
        settings.home / "refusals",
        package,
        {
            "tables.py": f"""
            import pipelines.authoring as tb
            from pyspark.sql import functions as F
            from tests.support import textbook_queries as q

            tb.landing("bronze.events", tb.files("events", "json", tb.schema(q.EVENT)))
            tb.landing("bronze.clicks", tb.files("clicks", "json", tb.schema(q.CLICK)))


            @tb.gold({", ".join(f"{k}={v}" for k, v in decorator.items())})
            def refused(bronze_events, bronze_clicks):
                "A query that cannot stream as declared."
                {body}
            """
        },
    )
    with pytest.raises(ConfigError) as refused:  # when the dataset loads, before any run
        load_registry([package])
    assert not settings.checkpoint_for("gold.refused").exists()
    assert "tables.py:9, function refused" in str(refused.value)
    return str(refused.value)


def test_grouping_a_join_without_a_window_names_the_missing_window(spark, lake):
    message = _refusal(
        spark,
        lake.settings,
        "refused_join_group",
        'return q.attributed(bronze_events, bronze_clicks).groupBy("user_id").count()',
        keys="'user_id'",
        watermark="tb.watermark('event_time', '1 hour')",
    )
    assert "gold.refused" in message
    assert "groups watermarked rows by user_id without an event-time window" in message
    assert "F.window(" in message and "write=tb.recompute(by=('user_id',))" in message
    assert "declare a watermark" not in message


def test_a_distinct_count_says_no_output_mode_can_stream_it(spark, lake):
    message = _refusal(
        spark,
        lake.settings,
        "refused_distinct",
        'return bronze_events.groupBy("product_id").agg(F.countDistinct("user_id").alias("users"))',
        write="tb.replace()",
        keys="'product_id'",
    )
    assert "gold.refused" in message and "cannot run as a stream in any output mode" in message
    assert "distinct aggregation" in message and "write=tb.recompute(by=" in message
    assert "output mode 'complete' is not possible" not in message
