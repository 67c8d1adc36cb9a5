"""Structured Streaming semantics of the clickstream dataset, checked against independent plain-Python answers.

One generated data set is landed in three groups. Home B lands groups 1+2 at once and runs once; home I runs
after each group (and once more with nothing new). Groups 1-2 arrive in event-time order (jitter within the
watermark), so I after run 2 must equal B exactly (incremental equals batch). Group 3 brings stragglers from
the first hour (behind every watermark), a new catalog version, and change-feed rows that are out of order or
re-sent. tests/support/streaming_reference.py computes every expected table from the landed files alone.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from infra.errors import ConfigError
from infra.settings import Settings
from infra.spark import get_spark
from pipelines.authoring.load import load_registry
from pipelines.datasets.clickstream import tables as cs
from pipelines.datasets.clickstream.sample_data import make_clickstream, write_json_lines, write_products_csv
from pipelines.io.checkpoints import committed_watermark_ms
from pipelines.io.formats import table_format
from pipelines.run.pipeline import run_pipeline
from pipelines.run.runner import run_table
from pipelines.run.summary import table_numbers
from pipelines.sources.report import RunReport
from pipelines.sources.streams import late_output
from pipelines.spec.registry import Registry
from pipelines.spec.sources import TableSource, Watermark
from pipelines.spec.tables import TableSpec
from pipelines.write.merge import OverwriteSink, UpsertSink
from pipelines.write.sinks import AppendSink, BatchContext
from tests.support import streaming_reference as ref
from tests.support.helpers import rows_of, table
from tests.support.homes import make_settings

DELAY_MS = 10 * ref.MINUTE_MS
GAP_MS = cs.SESSION_GAP_SECONDS * 1000
CLICKSTREAM = load_registry(["pipelines.datasets.clickstream"])
SPECS = tuple(CLICKSTREAM)
TABLES = tuple(out.name for spec in SPECS for out in spec.outputs())
VOLATILE = ("_ingested_at", "_batch_id", "_source_file", "file", "recorded_at")  # paths differ between homes


@dataclass
class Lake:
    """The two homes, what was landed for each run of I, and the reports of I's runs."""

    batch: Settings
    inc: Settings
    files: list[dict[str, list[Path]]]  # per run of I: folder -> files landed before that run
    batch_contents: dict[str, list[tuple]]
    inc_contents_run2: dict[str, list[tuple]]
    snapshots_before_noop: dict[str, list[int]]
    snapshots_after_noop: dict[str, list[int]]
    reports: list[dict[str, RunReport]]  # runs 1, 2, no-op, 3
    resent_changes: int
    withheld_changes: int


def _land(settings: Settings, run: int, group: dict[str, list[dict]]) -> dict[str, list[Path]]:
    landed: dict[str, list[Path]] = defaultdict(list)
    for folder, records in group.items():
        if not records:
            continue
        target = settings.landing / folder
        if folder == "products":
            landed[folder].append(write_products_csv(target, f"products-run{run}.csv", records))
        else:
            landed[folder].append(write_json_lines(target, f"{folder}-run{run}.json", records))
    return landed


def _groups() -> tuple[list[dict[str, list[dict]]], int, int]:
    data = make_clickstream(2400, seed=11, hours=4, users=40, customers=40)
    rng = random.Random(11)
    imps = data.impressions
    n1, n2 = int(len(imps) * 0.45), int(len(imps) * 0.9)
    g1_imps, g2_imps, g3_imps = imps[:n1], imps[n1:n2], imps[n2:]
    late_imps = rng.sample(g1_imps[: n1 // 2], 30)
    g1_imps = [i for i in g1_imps if i not in late_imps]
    b1, b2 = max(ref.ms(i["event_time"]) for i in imps[:n1]), max(ref.ms(i["event_time"]) for i in imps[:n2])
    g1_clicks = [c for c in data.clicks if ref.ms(c["event_time"]) < b1]
    g2_clicks = [c for c in data.clicks if b1 <= ref.ms(c["event_time"]) < b2]
    g3_clicks = [c for c in data.clicks if ref.ms(c["event_time"]) >= b2]
    late_clicks = rng.sample(g1_clicks[: len(g1_clicks) // 2], 15)
    g1_clicks = [c for c in g1_clicks if c not in late_clicks]
    changes = list(data.changes)
    rng.shuffle(changes)
    withheld = changes[: len(changes) // 7]
    rest = changes[len(changes) // 7 :]
    c1, c2 = rest[: len(rest) // 2], rest[len(rest) // 2 :]
    resent = c1[:20]
    groups = [
        {"impressions": g1_imps, "clicks": g1_clicks, "products": data.products, "customer_changes": c1},
        {"impressions": g2_imps, "clicks": g2_clicks, "customer_changes": c2},
        {
            "impressions": [*late_imps, *g3_imps],
            "clicks": [*late_clicks, *g3_clicks],
            "products": data.product_updates,
            "customer_changes": [*withheld, *resent],
        },
    ]
    return groups, len(resent), len(withheld)


def _contents(spark, settings: Settings) -> dict[str, list[tuple]]:
    out = {}
    for name in TABLES:
        df = table(spark, settings, name)
        out[name] = rows_of(df, VOLATILE)
    return out


def _snapshots(spark, settings: Settings) -> dict[str, list[int]]:
    fmt = table_format(settings)
    return {
        name: [r.snapshot_id for r in spark.sql(f"SELECT snapshot_id FROM {fmt.qualified(name)}.snapshots").collect()]
        for name in TABLES
    }


def _run(spark, settings: Settings) -> dict[str, RunReport]:
    return {r.table: r for r in run_pipeline(spark, settings, Registry(SPECS))}


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory) -> Lake:
    groups, resent, withheld = _groups()
    batch = make_settings(tmp_path_factory.mktemp("streaming-batch"))
    inc = make_settings(tmp_path_factory.mktemp("streaming-inc"))
    assert get_spark(batch) is spark and get_spark(inc) is spark

    _land(batch, 1, groups[0])
    _land(batch, 2, groups[1])
    _run(spark, batch)
    batch_contents = _contents(spark, batch)

    files, reports = [], []
    for run in (1, 2):
        files.append(_land(inc, run, groups[run - 1]))
        reports.append(_run(spark, inc))
    inc_contents = _contents(spark, inc)
    before = _snapshots(spark, inc)
    reports.append(_run(spark, inc))  # nothing new: a replay of the same files
    after = _snapshots(spark, inc)
    files.append(_land(inc, 3, groups[2]))
    reports.append(_run(spark, inc))
    return Lake(batch, inc, files, batch_contents, inc_contents, before, after, reports, resent, withheld)


def _runs(lake: Lake, folder: str) -> list[list[dict]]:
    reader = ref.read_csv if folder == "products" else ref.read_json_lines
    return [reader(f.get(folder, [])) for f in lake.files]


def _impression_runs(lake: Lake) -> list[list[dict]]:
    return ref.enrich(_runs(lake, "impressions"), ref.catalog_by_run(_runs(lake, "products")))


def _late_records(spark, settings: Settings, name: str) -> list[dict]:
    return [
        {"source": r.source, **json.loads(r.record), "_watermark": r.watermark}
        for r in table(spark, settings, name).collect()
    ]


def test_incremental_runs_equal_one_batch_run(lake):
    for name in TABLES:
        assert lake.inc_contents_run2[name] == lake.batch_contents[name], f"{name} differs from the one-run result"
    assert len(lake.batch_contents["gold.ad_clicks"]) > 100
    assert len(lake.batch_contents["gold.user_visits"]) > 20


def test_replaying_the_same_files_changes_nothing(lake):
    assert lake.snapshots_after_noop == lake.snapshots_before_noop
    noop = lake.reports[2]
    assert all(r.rows_in == 0 and r.rows_written(t) == 0 for r in noop.values() for t in r.tables)


def test_windows_close_at_the_watermark_and_late_rows_are_diverted(spark, lake):
    s, runs = lake.inc, _impression_runs(lake)
    on_time, late, watermark = ref.split_late(runs, DELAY_MS)
    assert len(late) == 30  # the stragglers, and nothing else
    final = lake.reports[3]

    tumbling = ref.tumbling(on_time, 10 * ref.MINUTE_MS, "category")
    closed = {k: v for k, v in tumbling.items() if k[1] <= watermark}
    got = {
        (ref.ms(r.window_start), ref.ms(r.window_end), r.category): (r.impressions, r.cost_cents)
        for r in table(spark, s, "gold.impressions_10m").collect()
    }
    assert got == closed
    assert len(closed) < len(tumbling), "windows the watermark has not passed must still be open"
    assert ref.ms(final["gold.impressions_10m"].watermark.replace("Z", "+00:00")) == watermark

    sliding = ref.sliding(on_time, 10 * ref.MINUTE_MS, 5 * ref.MINUTE_MS, "category")
    got = {
        (ref.ms(r.window_start), ref.ms(r.window_end), r.category): (r.impressions, r.cost_cents)
        for r in table(spark, s, "gold.impressions_sliding_10m").collect()
    }
    assert got == sliding  # update mode: every window, open ones with their current counts

    sessions = {
        (x["key"], x["start"], x["end"]): (x["events"], x["cost_cents"])
        for x in ref.sessions(on_time, GAP_MS)
        if x["end"] <= watermark
    }
    got = {
        (r.user_id, ref.ms(r.window_start), ref.ms(r.window_end)): (r.impressions, r.cost_cents)
        for r in table(spark, s, "gold.user_sessions").collect()
    }
    assert got == sessions

    late_ids = sorted(r["impression_id"] for r in late)
    for name in ("gold.impressions_10m", "gold.impressions_sliding_10m", "gold.user_sessions", "gold.user_visits"):
        records = _late_records(spark, s, f"{name}_late")
        assert sorted(r["impression_id"] for r in records) == late_ids, name
        assert all(ref.ms(r["event_time"]) < ref.ms(r["_watermark"]) for r in records)
        assert final[name].metrics["rows_late"] == len(late) == table_numbers(final[name], name)["rows_late"]
        assert all(rep[name].rows_dropped_by_watermark == 0 for rep in lake.reports), "Spark dropped rows"
        # Every input row is in the query's input or in the late table: nothing is lost.
        assert sum(rep[name].rows_in for rep in lake.reports) == sum(map(len, runs))


def test_stream_static_join_sees_catalog_changes_from_the_next_run(spark, lake):
    expected = {r["impression_id"]: r["category"] for rows in _impression_runs(lake) for r in rows}
    got = {r.impression_id: r.category for r in table(spark, lake.inc, "silver.impressions").collect()}
    assert got == expected
    v1 = ref.catalog_by_run(_runs(lake, "products"))[0]
    moved = [r for r in _runs(lake, "impressions")[2] if got[r["impression_id"]] != v1[r["product_id"]]]
    assert moved, "impressions of run 3 must carry the updated categories"
    assert all(got[r["impression_id"]] == v1[r["product_id"]] for r in _runs(lake, "impressions")[0])


def test_stream_stream_join_with_watermarks_and_bounded_state(spark, lake):
    s = lake.inc
    imps, clicks = _impression_runs(lake), _runs(lake, "clicks")
    imp_on, click_on, imp_late, click_late = ref.split_late_join(imps, clicks, DELAY_MS)
    assert len(imp_late) == 30 and len(click_late) == 15
    expected = ref.attributed_clicks(imp_on, click_on, 5 * ref.MINUTE_MS)
    got = {
        r.click_id: (r.impression_id, r.category, r.ms_to_click) for r in table(spark, s, "gold.ad_clicks").collect()
    }
    assert got == expected
    every_click = ref.attributed_clicks(imp_on, [c for rows in clicks for c in rows], 10 * ref.MINUTE_MS)
    assert any(v[2] > 5 * ref.MINUTE_MS for v in every_click.values()), "data must test the time-range condition"

    records = _late_records(spark, s, "gold.ad_clicks_late")
    assert sorted(r["impression_id"] for r in records if r["source"] == "silver.impressions") == sorted(
        r["impression_id"] for r in imp_late
    )
    assert sorted(r["click_id"] for r in records if r["source"] == "bronze.clicks") == sorted(
        r["click_id"] for r in click_late
    )
    report = lake.reports[3]["gold.ad_clicks"]
    numbers = table_numbers(report, "gold.ad_clicks")
    assert numbers["state_rows"] == report.state_rows > 0
    # Bounded: the join keeps only rows a future on-time row could still match, not the whole history.
    assert report.state_rows < (len(imp_on) + len(click_on)) / 4
    assert numbers["rows_late"] == len(imp_late) + len(click_late)


def test_cdc_applies_scd1_and_scd2_under_out_of_order_and_replayed_changes(spark, lake):
    s = lake.inc
    changes = [c for rows in _runs(lake, "customer_changes") for c in rows]
    current, history = ref.scd(changes)
    got_current = {
        r.customer_id: (r.name, r.email, r.tier, r.last_sequence) for r in table(spark, s, "silver.customers").collect()
    }
    assert got_current == current
    got_history = sorted(
        (
            r.customer_id,
            r.seq,
            ref.ms(r.valid_from),
            None if r.valid_to is None else ref.ms(r.valid_to),
            r.is_current,
            r.is_deleted,
            r.name,
            r.email,
            r.tier,
        )
        for r in table(spark, s, "silver.customers_history").collect()
    )
    assert got_history == history
    assert any(deleted for *_, deleted, _n, _e, _t in history), "data must contain deletes"
    metrics = lake.reports[3]["silver.customers"].metrics
    assert metrics["cdc_changes_replayed"] == lake.resent_changes
    assert metrics["cdc_changes_applied"] == lake.withheld_changes


def test_stateful_visits_match_sessions_and_keep_state_in_the_checkpoint(spark, lake):
    s = lake.inc
    on_time, _, watermark = ref.split_late(_impression_runs(lake), DELAY_MS)
    expected = sorted(
        (x["key"], x["start"], x["last"], x["events"], x["categories"], x["cost_cents"])
        for x in ref.sessions(on_time, GAP_MS)
        if x["end"] <= watermark
    )
    got = sorted(
        (r.user_id, ref.ms(r.visit_start), ref.ms(r.visit_end), r.events, r.distinct_category, r.cost_cents)
        for r in table(spark, s, "gold.user_visits").collect()
    )
    assert got == expected
    assert any(x[3] > 1 for x in got)
    state = s.checkpoint_for("gold.user_visits") / "state"
    assert any(p.is_file() for p in state.rglob("*.delta")), "the visit state lives in the checkpoint"
    assert lake.reports[3]["gold.user_visits"].state_rows > 0  # open visits carried to the next run
    assert committed_watermark_ms(s.checkpoint_for("gold.user_visits")) == watermark


def test_complete_mode_replaces_the_table_with_the_full_aggregate(spark, lake):
    s = lake.inc
    expected: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for _, category, delta in (
        (r.click_id, r.category, r.ms_to_click) for r in table(spark, s, "gold.ad_clicks").collect()
    ):
        expected[category] += 1
        total[category] += delta
    got = {r.category: (r.clicks, r.total_ms_to_click) for r in table(spark, s, "gold.clicks_by_category").collect()}
    assert got == {c: (expected[c], total[c]) for c in expected}
    ops = [
        r.operation
        for r in get_spark(s)
        .sql(f"SELECT operation FROM {table_format(s).qualified('gold.clicks_by_category')}.snapshots")
        .collect()
    ]
    assert ops.count("overwrite") >= 2  # one replacement per run with new clicks


def test_progress_metrics_reach_the_table_numbers(lake):
    for name in ("gold.ad_clicks", "gold.impressions_10m", "gold.user_visits"):
        report = lake.reports[3][name]
        numbers = table_numbers(report, name)
        assert numbers["rows_in"] > 0 and numbers["batches"] >= 2  # the data batch and the no-data batch
        assert numbers["processed_rows_per_second"] > 0
        assert numbers["batch_ms_max"] > 0 and numbers["batch_ms_total"] >= numbers["batch_ms_max"]
        assert numbers["state_memory_bytes"] > 0
        assert numbers["watermark"].startswith("2026-")
    run3 = lake.files[2]
    landed = len(ref.read_json_lines(run3["impressions"])) + len(ref.read_json_lines(run3["clicks"]))
    assert lake.reports[3]["gold.ad_clicks"].rows_in == landed  # each row once, though the late split reads twice


def _spec(name: str, **kwargs) -> TableSpec:
    defaults = dict(
        output=replace(CLICKSTREAM.get("gold.impressions_10m").output, name=name),
        layer="gold",
        description="test",
        source=TableSource(CLICKSTREAM.get("silver.impressions").output.name),
        transform=cs.TUMBLING,
        sink=AppendSink(),
    )
    return TableSpec(**{**defaults, **kwargs})


def test_output_modes_the_query_or_sink_cannot_support_are_rejected_before_start(spark, lake):
    s = lake.inc
    with pytest.raises(ConfigError, match=r"gold.bad_update.*'update'.*AppendSink.*upsert"):
        Registry([*SPECS, _spec("gold.bad_update", output_mode="update", watermark=cs.EVENT_TIME)])
    with pytest.raises(ConfigError, match=r"late_table needs a watermark"):
        Registry(
            [*SPECS, _spec("gold.bad_late", extra_outputs=(late_output("gold.x_late"),), late_table="gold.x_late")]
        )
    with pytest.raises(ConfigError, match=r"gold.bad_append.*'append'.*without watermark.*declare a watermark"):
        run_table(spark, s, _spec("gold.bad_append"))
    with pytest.raises(ConfigError, match=r"gold.bad_complete.*'complete'.*no streaming aggregations"):
        run_table(
            spark, s, _spec("gold.bad_complete", transform=lambda df: df, sink=OverwriteSink(), output_mode="complete")
        )
    with pytest.raises(ConfigError, match=r"gold.bad_join.*'update'.*Update output mode"):
        run_table(
            spark,
            s,
            _spec(
                "gold.bad_join",
                output=replace(CLICKSTREAM.get("gold.ad_clicks").output, name="gold.bad_join"),
                transform=cs.ad_clicks,
                sink=UpsertSink(keys=("click_id",)),
                output_mode="update",
                watermark=cs.EVENT_TIME,
                secondary_sources=(
                    TableSource(
                        CLICKSTREAM.get("bronze.clicks").output.name, watermark=Watermark("event_time", "10 minutes")
                    ),
                ),
            ),
        )
    for name in ("gold.bad_append", "gold.bad_complete", "gold.bad_join"):
        assert not s.checkpoint_for(name).exists(), f"{name}: the query must not have started"
        assert not spark.catalog.tableExists(table_format(s).qualified(name))


def test_merge_sinks_are_idempotent_when_a_batch_is_replayed(spark, lake, tmp_path):
    s, fmt = lake.inc, table_format(lake.inc)
    (tmp_path / "metadata").write_text(json.dumps({"id": "replay-test"}))

    def ctx(name: str, batch_id: int) -> BatchContext:
        return BatchContext(spark, fmt, name, tmp_path, batch_id)

    windows = "gold.impressions_sliding_10m"
    before = rows_of(table(spark, s, windows))
    batch = spark.createDataFrame(table(spark, s, windows).collect(), table(spark, s, windows).schema)
    for _ in range(2):
        UpsertSink(keys=cs.SLIDING.keys).write(ctx(windows, 7), batch)
    assert rows_of(table(spark, s, windows)) == before

    customers = rows_of(table(spark, s, "silver.customers")), rows_of(table(spark, s, "silver.customers_history"))
    spec = next(spec for spec in SPECS if spec.name == "silver.customers")
    source, cdc = spec.source, spec.sink
    changes = spark.read.schema(source.schema).json([str(p) for p in lake.files[0]["customer_changes"]])
    changes = changes.withColumn("_corrupt_record", F.lit(None).cast("string"))
    for batch_id in (8, 8, 9):
        context = ctx("silver.customers", batch_id)
        cdc.write(context, changes)
        assert context.metrics["cdc_changes_applied"] == 0
        assert context.metrics["cdc_changes_replayed"] == changes.count()
    assert (
        rows_of(table(spark, s, "silver.customers")),
        rows_of(table(spark, s, "silver.customers_history")),
    ) == customers


def test_tributary_state_shows_what_the_stateful_tables_keep(spark, lake, capsys):
    from argparse import Namespace

    from orchestration.cli.state import _state
    from pipelines.ops.state import store_rows, table_state

    s = lake.inc
    (visits,) = table_state(spark, s, CLICKSTREAM, "gold.user_visits")
    assert visits.checkpoint == s.checkpoint_for("gold.user_visits") and visits.last_batch is not None
    (store,) = visits.stores
    assert store.operator == "applyInPandasWithState" and store.last_batch == visits.last_batch
    keys, rows = store_rows(spark, visits.checkpoint, store, limit=3)
    # The open visits carried to the next run, one key per user: what the last run's progress counted.
    assert keys == lake.reports[3]["gold.user_visits"].state_rows > 3
    assert len(rows) == 3
    for key, value in rows:
        # A user's open visits as the function keeps them (JSON in the group state) and the state's timeout.
        open_visits = json.loads(json.loads(value)["groupState"]["visits"])
        assert json.loads(key)["user_id"] and open_visits and all(v["start"] <= v["end"] for v in open_visits)
        assert json.loads(value)["timeoutTimestamp"] > 0

    (joined,) = table_state(spark, s, CLICKSTREAM, "gold.ad_clicks")
    sides = {st.store.split("-")[0] for st in joined.stores}
    assert sides == {"left", "right"} and {st.operator for st in joined.stores} == {"symmetricHashJoin"}

    assert table_state(spark, s, CLICKSTREAM, "silver.products")[0].stores == ()

    assert _state(Namespace(table="gold.user_visits", rows=2), s) == 0
    out = capsys.readouterr().out
    assert f"gold.user_visits: checkpoint {visits.checkpoint}, last committed batch {visits.last_batch}" in out
    assert f"operator 0 applyInPandasWithState, store default: {keys} keys" in out
    assert f"... {keys - 2} more (--rows N shows more)" in out
    with pytest.raises(ConfigError, match=r"no table 'gold\.nope' in the registry"):
        _state(Namespace(table="gold.nope", rows=2), s)
