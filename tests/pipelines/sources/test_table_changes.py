"""Tables downstream of a changing table follow its updates and deletes through its change feed
(`pipelines.sources.table_changes`), on Iceberg and on Delta.

A CDC feed lands in three files: inserts; then updates, deletes and new keys; then keys changed twice in one file
with the lines in reverse order, deleted keys inserted again, stale changes with a lower sequence, and duplicate
lines. After each landing, a `replace` gold, a `recompute(by=...)` gold (one whose groups vanish when their last
row is deleted) and an `upsert` gold on the CDC table equal the same query over the live rows computed here from
the lines themselves; a run with nothing new writes nothing; and the incremental home equals a one-shot home over
the same files. The same holds with an `upsert` silver in the middle, when the reader is killed before its commit
and after it (before it records how far it read).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import replace
from datetime import date, datetime, timedelta
from pathlib import Path

from pyspark.sql import SparkSession

from infra.settings import Settings
from pipelines.authoring.load import load_registry
from pipelines.io import iceberg
from pipelines.run.pipeline import run_pipeline
from tests.support.changes_child import kill_following
from tests.support.helpers import current_snapshots, table
from tests.support.packages import write_package

CDC_TABLES = """
import pipelines.authoring as tb
from pyspark.sql import functions as F

CHANGE = tb.schema(
    "o_orderkey BIGINT, o_orderstatus STRING, o_totalprice DOUBLE, o_orderdate DATE, op STRING, seq BIGINT, "
    "changed_at TIMESTAMP"
)
tb.landing(
    "silver.orders",
    tb.files("order_changes", "json", CHANGE),
    write=tb.cdc("o_orderkey", sequence="seq", values=("o_orderstatus", "o_totalprice", "o_orderdate")),
)


def totals(df, *by):
    return df.groupBy(*by).agg(F.count(F.lit(1)).alias("orders"), F.sum("o_totalprice").alias("value"))


@tb.gold(write=tb.replace())
def orders_by_status(silver_orders):
    return totals(silver_orders, "o_orderstatus")


@tb.gold(write=tb.recompute(by="o_orderdate", keys=("o_orderdate", "o_orderstatus")))
def daily_status(silver_orders):
    return totals(silver_orders, "o_orderdate", "o_orderstatus")


@tb.gold(write=tb.recompute(by="o_orderstatus", keys="o_orderstatus"))
def status_totals(silver_orders):
    return totals(silver_orders, "o_orderstatus")


@tb.gold(write=tb.upsert("o_orderkey"))
def large_orders(silver_orders):
    return silver_orders.filter("o_totalprice >= 30").select("o_orderkey", "o_orderstatus", "o_totalprice")
"""

UPSERT_TABLES = """
import pipelines.authoring as tb
from pyspark.sql import functions as F

VERSION = tb.schema("o_orderkey BIGINT, o_orderstatus STRING, o_totalprice DOUBLE, version BIGINT")
tb.landing("bronze.order_versions", tb.files("order_versions", "json", VERSION))


@tb.silver(write=tb.upsert("o_orderkey", version="version"))
def orders_latest(bronze_order_versions):
    landed = bronze_order_versions.filter("_corrupt_record IS NULL AND o_orderkey IS NOT NULL")
    return landed.select("o_orderkey", "o_orderstatus", "o_totalprice", "version")


def totals(df):
    return df.groupBy("o_orderstatus").agg(F.count(F.lit(1)).alias("orders"), F.sum("o_totalprice").alias("value"))


@tb.gold(write=tb.replace())
def latest_by_status(silver_orders_latest):
    return totals(silver_orders_latest)


@tb.gold(write=tb.recompute(by="o_orderstatus", keys="o_orderstatus"))
def latest_status_totals(silver_orders_latest):
    return totals(silver_orders_latest)
"""

ORDERS = 300
STATUSES = ("F", "O", "P")
_START = datetime(2026, 3, 1)


def _change(key: int, op: str, seq: int, status: str | None = None, price: float = 0.0, day: int = 0) -> dict:
    values = {"o_orderstatus": status, "o_totalprice": price, "o_orderdate": str(date(2026, 3, 1 + day))}
    at = (_START + timedelta(hours=seq)).isoformat()
    return {"o_orderkey": key, **(values if op != "D" else {}), "op": op, "seq": seq, "changed_at": at}


def _cdc_landings() -> list[list[dict]]:
    first = [_change(k, "I", 1, STATUSES[k % 3], float(k % 50 + 1), k % 5) for k in range(ORDERS)]
    # 10 % updated (status and price, some to another day), 2 % deleted, 3 % new keys on a day of their own.
    second = [_change(k, "U", 2, STATUSES[(k + 1) % 3], float(k % 50 + 8), (k + 1) % 5) for k in range(0, ORDERS, 10)]
    second += [_change(k, "D", 2) for k in range(7, ORDERS, 50)]
    second += [_change(k, "I", 1, "P", 40.0, 20) for k in range(ORDERS, ORDERS + 9)]
    # Keys changed twice (lines in reverse order), deleted keys inserted again, the new day's keys deleted (its
    # groups vanish), stale changes below every stored sequence, and duplicate lines.
    twice = [(_change(k, "U", 4, "F", 55.0, 2), _change(k, "U", 3, "O", 1.0, 3)) for k in range(5, ORDERS, 20)]
    third = [line for pair in twice for line in pair]
    third += [_change(k, "I", 3, "O", 33.0, 1) for k in range(7, ORDERS, 50)]
    third += [_change(k, "D", 2) for k in range(ORDERS, ORDERS + 9)]
    third += [_change(k, "U", 0, "F", 99.0, 4) for k in range(0, ORDERS, 30)]
    third += [pair[0] for pair in twice[:5]] + third[:3]
    return [first, second, third]


def _versions_landings() -> list[list[dict]]:
    def version(key: int, v: int, status: str, price: float) -> dict:
        return {"o_orderkey": key, "o_orderstatus": status, "o_totalprice": price, "version": v}

    first = [version(k, 1, STATUSES[k % 3], float(k % 40 + 1)) for k in range(200)]
    second = [version(k, 2, STATUSES[(k + 2) % 3], float(k % 40 + 5)) for k in range(0, 200, 5)]
    second += [version(k, 1, "P", 12.0) for k in range(200, 210)]
    pairs = [(version(k, 4, "F", 70.0), version(k, 3, "O", 2.0)) for k in range(3, 200, 9)]
    third = [line for pair in pairs for line in pair]
    third += [version(k, 0, "O", 500.0) for k in range(0, 200, 25)] + third[:4]
    return [first, second, third]


def _live_orders(landings: list[list[dict]]) -> dict[int, dict]:
    """The live version of each order after `landings`: per key, its change with the highest sequence (the first
    line of a sequence counts; a later line of the same key and sequence is a replay); a delete removes it."""
    seen: dict[int, dict[int, dict]] = defaultdict(dict)
    for line in (line for landing in landings for line in landing):
        seen[line["o_orderkey"]].setdefault(line["seq"], line)
    newest = {key: changes[max(changes)] for key, changes in seen.items()}
    return {key: line for key, line in newest.items() if line["op"] != "D"}


def _latest_versions(landings: list[list[dict]]) -> dict[int, dict]:
    """The newest version of each order after `landings`."""
    out: dict[int, dict] = {}
    for line in (line for landing in landings for line in landing):
        if line["o_orderkey"] not in out or line["version"] >= out[line["o_orderkey"]]["version"]:
            out[line["o_orderkey"]] = line
    return out


def _totals(orders: dict[int, dict], *by: str) -> list[tuple]:
    counts: Counter[tuple] = Counter()
    values: Counter[tuple] = Counter()
    for line in orders.values():
        group = tuple(date.fromisoformat(line[c]) if c == "o_orderdate" else line[c] for c in by)
        counts[group] += 1
        values[group] += line["o_totalprice"]
    return sorted((*group, counts[group], values[group]) for group in counts)


def _rows(spark: SparkSession, settings: Settings, name: str, *columns: str) -> list[tuple]:
    df = table(spark, settings, name)
    return sorted(tuple(r) for r in df.select(*(columns or df.columns)).collect())


def _land(settings: Settings, folder: str, name: str, lines: list[dict]) -> None:
    landing = settings.landing / folder
    landing.mkdir(parents=True, exist_ok=True)
    (landing / name).write_text("".join(json.dumps(line) + "\n" for line in lines))


def _package(tmp_path: Path, name: str, text: str) -> tuple[Path, str]:
    root = tmp_path / "packages"
    return root, write_package(root, name, {"tables.py": text})


def _one_shot(
    spark: SparkSession, settings: Settings, factory: Callable[[], Settings], package: str, folder: str, landings
) -> Settings:
    """A second home in the same format that lands every file at once and runs once."""
    other = replace(factory(), table_format=settings.table_format)
    for i, lines in enumerate(landings):
        _land(other, folder, f"{i}.json", lines)
    run_pipeline(spark, other, load_registry([package]))
    return other


CDC_GOLD = ("gold.orders_by_status", "gold.daily_status", "gold.status_totals", "gold.large_orders")


def _cdc_expected(live: dict[int, dict]) -> dict[str, list[tuple]]:
    large = sorted(
        (k, line["o_orderstatus"], line["o_totalprice"]) for k, line in live.items() if line["o_totalprice"] >= 30
    )
    return {
        "gold.orders_by_status": _totals(live, "o_orderstatus"),
        "gold.daily_status": _totals(live, "o_orderdate", "o_orderstatus"),
        "gold.status_totals": _totals(live, "o_orderstatus"),
        "gold.large_orders": large,
    }


def _no_session(*_args: object) -> SparkSession:
    raise AssertionError("a run with nothing new asked for a Spark session")


def test_readers_of_a_cdc_table_follow_its_updates_and_deletes(
    spark, format_settings, settings_factory, tmp_path, monkeypatch
):
    settings = format_settings
    _, package = _package(tmp_path, f"follow_cdc_{settings.table_format}", CDC_TABLES)
    registry = load_registry([package])
    landings = _cdc_landings()
    for i, lines in enumerate(landings):
        _land(settings, "order_changes", f"{i}.json", lines)
        reports = {r.table: r for r in run_pipeline(spark, settings, registry)}
        live = _live_orders(landings[: i + 1])
        assert _rows(spark, settings, "silver.orders", "o_orderkey") == [(k,) for k in sorted(live)]
        for name, expected in _cdc_expected(live).items():
            assert _rows(spark, settings, name) == expected, f"{name} after landing {i}"
        for name in CDC_GOLD:
            metrics = reports[name].metrics
            assert not reports[name].skipped and reports[name].note is None, (name, reports[name].note)
            # The first run recomputes the table whole; later ones read only the changed rows.
            assert metrics.get("whole_recomputes", 0) == (1 if i == 0 else 0), (name, metrics)
            if i:
                assert 0 < metrics["changed_rows_read"] == reports[name].rows_in < len(live), (name, metrics)
        if i == 2:  # the day of the new keys lost its last order: its groups are gone
            assert reports["gold.daily_status"].metrics["rows_deleted:gold.daily_status"] == 1
            assert reports["gold.large_orders"].metrics["rows_deleted:gold.large_orders"] > 0

    # Nothing new: every table is skipped, nothing is written, and no Spark session is asked for.
    before = current_snapshots(spark, settings)
    monkeypatch.setattr(iceberg, "get_spark", _no_session)
    again = run_pipeline(_no_session, settings, registry)
    monkeypatch.undo()
    assert all(r.skipped and r.rows_in == 0 for r in again), [(r.table, r.rows_in) for r in again if not r.skipped]
    assert current_snapshots(spark, settings) == before

    other = _one_shot(spark, settings, settings_factory, package, "order_changes", landings)
    for name in ("silver.orders", *CDC_GOLD):
        assert _rows(spark, other, name) == _rows(spark, settings, name), name


def test_readers_of_an_upsert_silver_follow_it_through_kills(spark, format_settings, settings_factory, tmp_path):
    settings = format_settings
    packages, package = _package(tmp_path, f"follow_upsert_{settings.table_format}", UPSERT_TABLES)
    registry = load_registry([package])
    landings = _versions_landings()
    gold = ("gold.latest_by_status", "gold.latest_status_totals")

    def check(upto: int) -> None:
        expected = _totals(_latest_versions(landings[: upto + 1]), "o_orderstatus")
        for name in gold:
            assert _rows(spark, settings, name) == expected, f"{name} after landing {upto}"

    _land(settings, "order_versions", "0.json", landings[0])
    run_pipeline(spark, settings, registry)
    check(0)

    # The upstream commits the second landing; then each reader is killed, one before its commit and one after
    # it (before it records how far it read); the next run ends as if neither had been.
    _land(settings, "order_versions", "1.json", landings[1])
    run_pipeline(spark, settings, registry, ["bronze.order_versions", "silver.orders_latest"])
    stale = _rows(spark, settings, "gold.latest_by_status")
    kill_following(settings, packages, package, "gold.latest_by_status", "before")
    kill_following(settings, packages, package, "gold.latest_status_totals", "after")
    assert _rows(spark, settings, "gold.latest_by_status") == stale
    assert _rows(spark, settings, "gold.latest_status_totals") != stale  # committed, position not recorded
    reports = {r.table: r for r in run_pipeline(spark, settings, registry)}
    assert reports["silver.orders_latest"].skipped
    assert all(reports[name].metrics["changed_rows_read"] > 0 for name in gold)
    check(1)

    _land(settings, "order_versions", "2.json", landings[2])
    run_pipeline(spark, settings, registry)
    check(2)

    other = _one_shot(spark, settings, settings_factory, package, "order_versions", landings)
    for name in ("silver.orders_latest", *gold):
        assert _rows(spark, other, name) == _rows(spark, settings, name), name
