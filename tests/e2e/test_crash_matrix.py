"""SIGKILL at every point around each commit of every write strategy, then a re-run: tables as if never killed.

Each case lands the same data as an uninterrupted reference run, runs the target's upstream tables, runs the
target in a child process that SIGKILLs its whole process group (with its JVM) at one point of one micro-batch
(`tests/support/crash_child.py`), re-runs the target, and compares every table the target writes with the reference.
Cases with two drops run the whole chain on a first drop, then kill the target while it takes in a second drop
whose events overlap the first, so its batches carry late rows too.

Cases share a home where that changes nothing a target sees (`_plan`): a home holds targets of one table format,
storage and number of drops, no target twice, and none that an earlier target of the home runs as its upstream.
So each target meets its upstream tables exactly as in a home of its own (taken in, and compared with the
reference, by earlier cases of the home; a kill there only makes a downstream stream read a table a crash wrote),
and is itself killed before anything ran it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace

import pytest
from pyspark.sql import functions as F

from infra.settings import Settings
from infra.spark import get_spark
from pipelines.datasets.clickstream.sample_data import generate_clickstream
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io import formats
from pipelines.run.pipeline import run_pipeline
from pipelines.run.runner import run_table
from pipelines.spec.registry import Registry
from quality.reconcile import pipelines_of, reconcile_pipeline
from tests.support.crash_child import kill_in_child
from tests.support.crash_registry import crash_registry
from tests.support.helpers import table
from tests.support.homes import make_settings
from tests.support.object_storage import in_bucket

# (target, batch counted from the first the killed run plans, kill point, drops of data)
CASES = [
    ("bronze.events", 1, "before", 1),  # staged write, per-file health, then publish
    ("bronze.events", 1, "between", 1),  # staged, not published
    ("bronze.events", 1, "between-2", 1),  # file health recorded, not published
    ("bronze.events", 2, "after", 1),
    ("bronze.events", 3, "committed", 1),
    ("silver.events", 0, "before", 1),  # validate + dedupe: quarantine, then silver
    ("silver.events", 0, "between", 1),
    ("silver.events", 0, "after", 1),
    ("silver.events", 0, "committed", 1),
    ("gold.daily_revenue", 0, "before", 1),  # recompute + merge
    ("gold.daily_revenue", 0, "after", 1),
    ("gold.event_counts_5m", 0, "after", 1),  # windowed append: data batch, then the batch that emits windows
    ("gold.event_counts_5m", 0, "emit", 1),  # killed between the two: the re-run must still emit the windows
    ("gold.event_counts_5m", 1, "before", 1),
    ("gold.event_counts_5m", 1, "after", 1),
    ("gold.event_counts_5m", 1, "committed", 1),
    ("silver.products", 0, "before", 1),  # upsert by version, landed CSV read by Spark's CSV reader
    ("silver.products", 0, "after", 1),
    ("silver.customers", 0, "between", 1),  # CDC first load: history and current rows are appends
    ("silver.customers", 1, "before", 1),  # CDC: file health, SCD2 history, then SCD1 current rows
    ("silver.customers", 1, "between", 1),
    ("silver.customers", 1, "between-2", 1),
    ("silver.customers", 1, "after", 1),
    ("silver.customers", 1, "committed", 1),
    ("gold.impressions_sliding_10m", 0, "after", 1),  # windowed update + merge
    ("gold.user_visits", 0, "after", 1),  # applyInPandasWithState
    ("gold.user_visits", 1, "after", 1),
    ("gold.impressions_10m", 0, "between", 2),  # late rows, then final windows
    ("gold.impressions_10m", 0, "after", 2),
    ("gold.impressions_10m", 0, "emit", 2),
    ("gold.ad_clicks", 0, "between", 2),  # stream-stream join with late rows
    ("gold.ad_clicks", 0, "after", 2),
    ("gold.ad_clicks", 0, "emit", 2),
    ("gold.user_sessions", 0, "between", 2),  # session windows
    ("gold.user_sessions", 0, "emit", 2),
    ("gold.clicks_by_category", 0, "after", 2),  # complete mode, overwrite
]


def _land(settings, drop: int) -> None:
    if drop == 1:
        generate(settings.landing, rows=1200, files=4, seed=5)
        generate_clickstream(settings.landing, impressions=600, files=2, seed=3)
    else:  # overlaps the first drop's event times: late rows behind the first run's watermarks
        generate_clickstream(settings.landing, impressions=300, files=2, seed=4)


def _contents(spark, settings, names) -> dict[str, list[tuple]]:
    out = {}
    for name in names:
        df = table(spark, settings, name)
        for column in ("_source_file", "file"):  # homes differ: compare file names, not paths
            if column in df.columns:
                df = df.withColumn(column, F.element_at(F.split(column, "/"), -1))
        cols = [c for c in df.columns if c not in ("_ingested_at", "recorded_at")]
        rows = [r.asDict() for r in df.select(*cols).collect()]
        if "record" in cols:  # a late row keeps its input row as JSON: normalize that row's volatile lineage too
            for row in rows:
                row["record"] = _stable_record(row["record"])
        out[name] = sorted((tuple(r.values()) for r in rows), key=repr)
    return out


def _stable_record(text: str) -> str:
    record = json.loads(text)
    record.pop("_ingested_at", None)
    record.pop("_batch_id", None)  # which bronze batch read a file depends on the order of equal file times
    if "_source_file" in record:
        record["_source_file"] = record["_source_file"].rsplit("/", 1)[-1]
    return json.dumps(record, sort_keys=True)


def _chain(registry: Registry, target: str) -> list[str]:
    """The target's transitive upstream tables, in registry order."""
    needed, todo = set(), [target]
    while todo:
        for up in registry.get(todo.pop()).upstreams:
            if up not in needed:
                needed.add(up)
                todo.append(up)
    return [s.name for s in registry if s.name in needed]


def _outputs(registry: Registry, target: str) -> list[str]:
    return [out.name for out in registry.get(target).outputs()]


@pytest.fixture(scope="module", autouse=True)
def staged_bronze():
    """Every bronze batch is staged (write-audit-publish), however small, here and in the killed children."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRIBUTARY_STAGE_LANDING_MB", "0")
        yield


@pytest.fixture(scope="module")
def reference(spark, tmp_path_factory):
    """Every table after an uninterrupted run of the first drop, and after a second run with the second drop."""
    out = {}
    s = make_settings(tmp_path_factory.mktemp("reference"))
    names = [out.name for spec in crash_registry() for out in spec.outputs()]
    for drop in (1, 2):
        _land(s, drop)
        run_pipeline(spark, s, crash_registry())
        out[drop] = _contents(spark, s, names)
    return out


# `make test` kills every write strategy at its riskiest point, and every kill point at least once (14 kills on
# Iceberg, 4 on Delta). `make test-crash` (TRIBUTARY_CRASH_MATRIX=full) runs all of CASES.
QUICK = {
    ("bronze.events", 1, "between", 1),
    ("silver.events", 0, "between", 1),
    ("gold.daily_revenue", 0, "before", 1),
    ("gold.event_counts_5m", 1, "committed", 1),
    ("gold.event_counts_5m", 0, "emit", 1),
    ("silver.products", 0, "after", 1),
    ("silver.customers", 0, "between", 1),
    ("silver.customers", 1, "between-2", 1),
    ("gold.impressions_sliding_10m", 0, "after", 1),
    ("gold.user_visits", 1, "after", 1),
    ("gold.impressions_10m", 0, "between", 2),
    ("gold.ad_clicks", 0, "between", 2),
    ("gold.user_sessions", 0, "between", 2),
    ("gold.clicks_by_category", 0, "after", 2),
}
# On Delta tables (compared with the same Iceberg reference): a staged landing batch, two commits of one batch
# (quarantine then silver; SCD2 history then current rows), and a stream from a Delta table with late rows.
QUICK_DELTA = {
    ("bronze.events", 1, "between", 1),
    ("silver.events", 0, "between", 1),
    ("silver.customers", 1, "between-2", 1),
    ("gold.impressions_10m", 0, "between", 2),
}
# Iceberg tables in a bucket of the S3 test server: one kill per write kind (append, dedupe, recompute, upsert,
# replace, CDC), compared with the same reference on disk.
QUICK_S3 = {
    ("bronze.events", 1, "between", 1),
    ("silver.events", 0, "between", 1),
    ("gold.daily_revenue", 0, "before", 1),
    ("silver.products", 0, "after", 1),
    ("gold.clicks_by_category", 0, "after", 2),
    ("silver.customers", 1, "between-2", 1),
}
FULL = os.environ.get("TRIBUTARY_CRASH_MATRIX") == "full"
SELECTED = [
    (*case, table_format, storage)
    for table_format, storage, quick in (
        ("iceberg", "local", QUICK),
        ("delta", "local", QUICK_DELTA),
        ("iceberg", "s3", QUICK_S3),
    )
    for case in CASES
    if FULL or case in quick
]


@dataclass
class _Home:
    """A home shared by the cases of one group: what they have in common, its targets in the order they are
    killed, and its settings once the group's first case made it."""

    table_format: str
    storage: str
    drops: int
    targets: list[str] = field(default_factory=list)
    settings: Settings | None = None
    killed: set[str] = field(default_factory=set)


def _plan(registry: Registry) -> dict[tuple, _Home]:
    """The home of each selected case: the first of its (format, storage, drops) whose earlier targets neither are
    its target nor run it as their upstream."""
    homes: list[_Home] = []
    plan = {}
    for case in SELECTED:
        target, _, _, drops, table_format, storage = case
        home = next(
            (
                h
                for h in homes
                if (h.table_format, h.storage, h.drops) == (table_format, storage, drops)
                and all(target != t and target not in _chain(registry, t) for t in h.targets)
            ),
            None,
        )
        if home is None:
            home = _Home(table_format, storage, drops)
            homes.append(home)
        home.targets.append(target)
        plan[case] = home
    return plan


@pytest.fixture(scope="module")
def homes():
    """The shared home of each case (built by its group's first case)."""
    return _plan(crash_registry())


def _prepared(spark, home: _Home, request, tmp_path_factory) -> Settings:
    """The group's home, made and landed by the group's first case: with two drops, every target of the group and
    its upstream tables have taken in the first drop before the second lands."""
    if home.settings is None:
        s = replace(make_settings(tmp_path_factory.mktemp("crash")), table_format=home.table_format)
        assert get_spark(s) is spark  # registers the home's catalog on the shared session
        if home.storage == "s3":
            s = in_bucket(s, request.getfixturevalue("s3_server"))
        registry = crash_registry()
        _land(s, 1)
        if home.drops == 2:
            needed = {t for target in home.targets for t in (*_chain(registry, target), target)}
            run_pipeline(spark, s, registry, [spec.name for spec in registry if spec.name in needed])
            _land(s, 2)
        home.settings = s
    return home.settings


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "batch", "point", "drops", "table_format", "storage"), SELECTED, ids=lambda v: str(v)
)
def test_kill_then_rerun_matches_uninterrupted(
    spark, homes, reference, request, tmp_path_factory, target, batch, point, drops, table_format, storage
):
    home = homes[(target, batch, point, drops, table_format, storage)]
    s = _prepared(spark, home, request, tmp_path_factory)
    registry = crash_registry()
    # Nothing ran the target in this home yet (with two drops: only over the first).
    assert target not in home.killed and (drops == 2 or not formats.table_format(s).exists(spark, target))
    run_pipeline(spark, s, registry, _chain(registry, target))
    kill_in_child(s, target, batch, point)
    home.killed.add(target)

    run_table(spark, s, registry.get(target))

    names = _outputs(registry, target)
    assert _contents(spark, s, names) == {n: reference[drops][n] for n in names}
    if registry.get(target).sink.quarantines:
        _assert_commits_account_for_every_row(spark, s, registry, target)


def _assert_commits_account_for_every_row(spark, settings, registry: Registry, target: str) -> None:
    """The reconciliation read from what the batches recorded in their commits (the killed batch's first
    attempt and its replay included) passes with the numbers a count of every row gives."""
    pipeline = next(p for p in pipelines_of(registry) if p.silver.name == target)
    from_commits = reconcile_pipeline(spark, settings, pipeline)
    counted = reconcile_pipeline(spark, settings, pipeline, deep=True)
    assert any("counted from the commits" in note for note in from_commits.notes), from_commits.notes
    assert from_commits.passed and counted.passed, [o.summary() for o in from_commits.outcomes + counted.outcomes]
    assert [o.observed for o in from_commits.outcomes[:3]] == [o.observed for o in counted.outcomes[:3]]
