"""A `recompute` gold whose function is a group-by of counts, exact sums, minimums and maximums folds each batch's
partial aggregate into its stored rows (`pipelines.write.aggregate_sink`), and stays equal to the same query over
the silver rows, to the last decimal digit, on Iceberg and on Delta: through increments that touch every group,
a replayed batch, a stream started again from the upstream's first snapshot, and a change of the function.
A gold with an average (not combinable) is recomputed as before.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from infra.settings import Settings
from pipelines.authoring.load import load_registry
from pipelines.io.checkpoints import batch_files, pending_batch
from pipelines.io.formats import table_format
from pipelines.run.pipeline import run_pipeline
from pipelines.write.aggregates import AggregatedThrough, combinations
from tests.support.crash_child import kill_in_child
from tests.support.helpers import current_snapshots, table
from tests.support.packages import write_package

TABLES = """
import pipelines.authoring as tb
from pyspark.sql import functions as F

ORDER = tb.schema("order_id BIGINT, day DATE, region STRING, qty INT, amount DECIMAL(12,2), ordered_at TIMESTAMP")
tb.landing("bronze.orders", tb.files("orders", "json", ORDER))


@tb.silver(write=tb.dedupe("order_id", time="ordered_at"))
def orders(bronze_orders):
    return bronze_orders


@tb.gold(write=tb.recompute(by="day", keys=("day", "region")))
def daily(silver_orders):
    return silver_orders.filter("qty > 0").groupBy("day", "region").agg(
        F.count(F.lit(1)).alias("lines"),
        F.sum("qty").alias("units"),
        F.sum("amount").alias("amount"),
        F.min("amount").alias("smallest"),
        F.max("ordered_at").alias("last_at"),
    )


@tb.gold(write=tb.recompute(by="day", keys=("day", "region")))
def daily_mean(silver_orders):
    return silver_orders.groupBy("day", "region").agg(F.avg("amount").alias("mean"))
"""

REGIONS = ("north", "south", "east")
_START = datetime(2026, 5, 1, 8)


def _order(key: int, copy: int = 0) -> dict:
    # A tenth of the amounts are missing (a sum over a group's missing values stays NULL); qty 0 rows are filtered.
    amount = None if key % 10 == 3 else str(Decimal(key % 997) + Decimal("0.01") * (key % 100))
    at = _START + timedelta(minutes=key)
    return {
        "order_id": key,
        "day": str(date(2026, 5, 1 + key % 4)),
        "region": REGIONS[key % 3] if key % 41 else None,  # a group with a NULL region
        "qty": key % 5 + copy,
        "amount": amount,
        "ordered_at": at.isoformat(),
    }


def _landings() -> list[list[dict]]:
    first = [_order(k) for k in range(400)]
    # Every day and region again, some keys sent again (with other values: the first row of a key stays).
    second = [_order(k) for k in range(400, 520)] + [_order(k, copy=1) for k in range(0, 400, 37)]
    third = [_order(k) for k in range(520, 600)] + [_order(k, copy=2) for k in range(400, 520, 11)]
    return [first, second, third]


def _expected(landings: list[list[dict]]) -> list[tuple]:
    """The `daily` query over the first row of each key."""
    kept: dict[int, dict] = {}
    for line in (line for landing in landings for line in landing):
        kept.setdefault(line["order_id"], line)
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for line in kept.values():
        if line["qty"] > 0:
            groups[(date.fromisoformat(line["day"]), line["region"])].append(line)
    out = []
    for (day, region), lines in groups.items():
        amounts = [Decimal(x["amount"]) for x in lines if x["amount"] is not None]
        last = max(datetime.fromisoformat(x["ordered_at"]) for x in lines)
        out.append(
            (
                day,
                region,
                len(lines),
                sum(x["qty"] for x in lines),
                sum(amounts) if amounts else None,
                min(amounts) if amounts else None,
                last,
            )
        )
    return sorted(out, key=_order_key)


def _order_key(row: tuple) -> tuple:
    return tuple((v is None, v if v is not None else 0) for v in row)


def _rows(spark: SparkSession, settings: Settings, name: str) -> list[tuple]:
    return sorted((tuple(r) for r in table(spark, settings, name).collect()), key=_order_key)


def _land(settings: Settings, name: str, lines: list[dict]) -> None:
    folder = settings.landing / "orders"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(line) + "\n" for line in lines))


def _package(tmp_path: Path, name: str, text: str = TABLES) -> str:
    return write_package(tmp_path / "packages", name, {"tables.py": text})


def _record(spark: SparkSession, settings: Settings, name: str) -> AggregatedThrough | None:
    snapshot = table_format(settings).last_data_snapshot(spark, name)
    return AggregatedThrough.read(snapshot.summary) if snapshot else None


def _silver_last_batch(spark: SparkSession, settings: Settings) -> int:
    return table(spark, settings, "silver.orders").agg({"_batch_id": "max"}).first()[0]


def test_a_combinable_gold_folds_batches_in_and_stays_exact(spark, format_settings, tmp_path):
    settings = format_settings
    registry = load_registry([_package(tmp_path, f"folding_{settings.table_format}")])
    landings = _landings()
    for i, lines in enumerate(landings):
        _land(settings, f"{i}.json", lines)
        reports = {r.table: r for r in run_pipeline(spark, settings, registry)}
        assert _rows(spark, settings, "gold.daily") == _expected(landings[: i + 1]), f"after landing {i}"
        metrics = reports["gold.daily"].metrics
        # Rows in: the silver rows the batch added (the first load: every silver row), each counted once.
        seen = {x["order_id"] for landing in landings[:i] for x in landing}
        added = len({x["order_id"] for x in lines} - seen)
        assert reports["gold.daily"].rows_in == reports["gold.daily_mean"].rows_in == added
        if i:  # every group touched, none recomputed: the batch's partial rows are folded in
            assert metrics["aggregate_batches_folded"] == 1 and metrics.get("keys_recomputed", 0) == 0, metrics
            assert metrics["groups_folded"] == len({(x["day"], x["region"]) for x in lines if x["qty"] > 0})
        record = _record(spark, settings, "gold.daily")
        assert record is not None and record.through == _silver_last_batch(spark, settings)
        mean = reports["gold.daily_mean"].metrics
        assert mean["aggregate_not_combinable"] == 1 and mean["keys_recomputed"] > 0, mean

    # The average equals Spark's own over the silver rows.
    silver = table(spark, settings, "silver.orders")
    assert _rows(spark, settings, "gold.daily_mean") == sorted(
        (tuple(r) for r in silver.groupBy("day", "region").agg({"amount": "avg"}).collect()), key=_order_key
    )
    # Nothing new: nothing is written.
    before = current_snapshots(spark, settings)
    run_pipeline(spark, settings, registry)
    assert current_snapshots(spark, settings) == before


def test_a_replayed_or_restarted_stream_counts_no_row_twice(spark, fresh_settings, tmp_path):
    settings = fresh_settings
    registry = load_registry([_package(tmp_path, "folding_replay")])
    landings = _landings()
    _land(settings, "0.json", landings[0])
    run_pipeline(spark, settings, registry)
    _land(settings, "1.json", landings[1])
    run_pipeline(spark, settings, registry)
    expected = _expected(landings[:2])

    # Killed after its commit, before the checkpoint's: the batch runs again, its rows already counted.
    commits = batch_files(settings.checkpoint_for("gold.daily") / "commits")
    commits[max(commits)].unlink()
    report = {r.table: r for r in run_pipeline(spark, settings, registry, ["gold.daily"])}["gold.daily"]
    assert report.metrics["aggregate_batches_recomputed"] == 1 and "aggregate_batches_folded" not in report.metrics
    assert _rows(spark, settings, "gold.daily") == expected

    # A stream started again reads every silver row from the first snapshot: none is new to the table.
    shutil.rmtree(settings.checkpoint_for("gold.daily"))
    report = {r.table: r for r in run_pipeline(spark, settings, registry, ["gold.daily"])}["gold.daily"]
    assert report.metrics["aggregate_batches_recomputed"] == 1
    assert _rows(spark, settings, "gold.daily") == expected

    # The next batch is new again, and folded in.
    _land(settings, "2.json", landings[2])
    report = {r.table: r for r in run_pipeline(spark, settings, registry)}["gold.daily"]
    assert report.metrics["aggregate_batches_folded"] == 1
    assert _rows(spark, settings, "gold.daily") == _expected(landings)


def test_a_folding_gold_killed_after_its_commit_ends_as_if_never_killed(spark, format_settings, tmp_path):
    """SIGKILL (with the JVM) after the fold's MERGE committed and before the checkpoint's commit: the re-run
    replays the batch, recomputes the groups it touched instead of adding them twice, and the next batch folds."""
    settings = format_settings
    package = _package(tmp_path, f"folding_killed_{settings.table_format}")
    registry = load_registry([package])
    landings = _landings()
    _land(settings, "0.json", landings[0])
    run_pipeline(spark, settings, registry)
    _land(settings, "1.json", landings[1])
    run_pipeline(spark, settings, registry, ["bronze.orders", "silver.orders"])
    kill_in_child(settings, "gold.daily", 0, "after", (package,))
    # The fold committed; the checkpoint did not: the batch is pending.
    assert _rows(spark, settings, "gold.daily") == _expected(landings[:2])
    assert pending_batch(settings.checkpoint_for("gold.daily")) is not None

    report = {r.table: r for r in run_pipeline(spark, settings, registry, ["gold.daily"])}["gold.daily"]
    assert report.metrics["aggregate_batches_recomputed"] == 1 and "aggregate_batches_folded" not in report.metrics
    assert _rows(spark, settings, "gold.daily") == _expected(landings[:2])
    _land(settings, "2.json", landings[2])
    report = {r.table: r for r in run_pipeline(spark, settings, registry)}["gold.daily"]
    assert report.metrics["aggregate_batches_folded"] == 1
    assert _rows(spark, settings, "gold.daily") == _expected(landings)


def test_a_changed_function_recomputes_the_table_whole(spark, fresh_settings, tmp_path):
    settings = fresh_settings
    landings = _landings()
    _land(settings, "0.json", landings[0])
    run_pipeline(spark, settings, load_registry([_package(tmp_path, "folding_before")]))
    # The same columns, the smallest amount now the largest: the stored rows were aggregated in another shape.
    changed = TABLES.replace('F.min("amount").alias("smallest")', 'F.max("amount").alias("smallest")')
    _land(settings, "1.json", landings[1])
    registry = load_registry([_package(tmp_path, "folding_after", changed)])
    report = {r.table: r for r in run_pipeline(spark, settings, registry)}["gold.daily"]
    assert report.metrics["aggregate_whole_recomputes"] == 1
    got = _rows(spark, settings, "gold.daily")
    assert [r[:5] + r[6:] for r in got] == [r[:5] + r[6:] for r in _expected(landings[:2])]
    silver = table(spark, settings, "silver.orders").filter("qty > 0")
    maxima = {(r[0], r[1]): r[2] for r in silver.groupBy("day", "region").agg({"amount": "max"}).collect()}
    assert {r[:2]: r[5] for r in got} == maxima


@pytest.mark.parametrize(
    ("query", "combinable"),
    [
        ("df.groupBy('k').agg(F.count('v').alias('n'), F.sum('v').alias('s'), F.max('t').alias('m'))", True),
        ("df.filter('v > 1').withColumn('w', F.col('v') * 2).groupBy('k').agg(F.sum('w').alias('s'))", True),
        ("df.groupBy('k').agg(F.sum('v').alias('s')).select('s', 'k')", True),
        # Casts that keep every value combine; a narrowing one (NULL for a part that does not fit, without ANSI
        # mode) or one to a smaller scale (rounding each part) does not.
        (
            "df.groupBy('k').agg(F.sum('v').cast('decimal(22,2)').alias('s'), F.count('t').cast('long').alias('n'))",
            True,
        ),
        ("df.groupBy('k').agg(F.sum('d').cast('decimal(22,2)').alias('s'))", True),
        ("df.groupBy('k').agg(F.sum('d').cast('decimal(18,2)').alias('s'))", False),
        ("df.groupBy('k').agg(F.count('t').cast('int').alias('n'))", False),
        ("df.groupBy('k').agg(F.sum('d').cast('decimal(20,1)').alias('s'))", False),
        ("df.groupBy('k').agg(F.sum('d').cast('long').alias('s'))", False),
        ("df.groupBy('k').agg(F.sum('w').alias('s'))", False),  # decimal(38,2): stored + batch may round
        ("df.groupBy('k').agg(F.avg('v').alias('a'))", False),
        ("df.groupBy('k').agg(F.sum('f').alias('s'))", False),  # a float sum depends on the order it adds in
        ("df.groupBy('k').agg(F.countDistinct('v').alias('n'))", False),
        ("df.groupBy('k').agg((F.sum('v') * 2).alias('s'))", False),
        ("df.groupBy('k').agg(F.sum('v').alias('s')).withColumn('t', F.lit(1))", False),
        ("df.groupBy(F.col('k').alias('k')).agg(F.sum('v').alias('s'))", False),
        ("df.filter(F.rand() > 0.5).groupBy('k').agg(F.sum('v').alias('s'))", False),
        ("df.dropDuplicates(['v']).groupBy('k').agg(F.sum('v').alias('s'))", False),
        ("df.join(df.select('k'), 'k').groupBy('k').agg(F.sum('v').alias('s'))", False),
        ("df.groupBy('k').agg(F.expr('count(*) FILTER (WHERE v > 1)').alias('n'))", False),
        ("df.groupBy('k', 'v').agg(F.count('t').alias('n'))", False),  # grouped by more than the keys
    ],
)
def test_which_functions_combine(spark, query, combinable):
    from pyspark.sql import functions as F  # noqa: F401 (the queries use it)

    schema = "k int, v int, f double, t string, d decimal(9,2), w decimal(30,2)"
    df = spark.createDataFrame([(1, 2, 1.5, "x", Decimal("1.25"), Decimal("2.50"))], schema)  # noqa: F841
    assert (combinations(eval(query), ("k",)) is not None) is combinable
