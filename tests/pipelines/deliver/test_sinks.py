"""Sinks deliver every change of their table exactly once, on Iceberg and on Delta, to a real Kafka broker, a real
PostgreSQL and Delta tables outside the home: a CDC table's updates and deletes reach keyed destinations (a Kafka
topic read compacted, a PostgreSQL table, a Delta table), and its append-only bronze reaches unkeyed ones line for
line; a run with nothing new sends nothing; a run killed before, inside or after a destination's commit is
followed by a run that ends as if it had not been; an unreachable destination stops only its sink, with one line,
and the next run catches up once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import psycopg2
import pytest
from confluent_kafka import Consumer, TopicPartition
from dagster import materialize
from deltalake import DeltaTable

from infra.catalog import pyiceberg_catalog
from infra.deploy import postgres
from infra.kafka_broker import Broker
from infra.ports import free_port
from infra.settings import Settings
from orchestration.resources import SparkResource
from orchestration.sinks import DELIVERED_CHECK, build_sink_assets
from pipelines.authoring.load import load_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.deliver.run import reconcile, run_sink, run_sinks
from pipelines.io import iceberg
from pipelines.run.pipeline import run_pipeline
from pipelines.spec.delivery import SinkError
from tests.support.jvm import short_lived
from tests.support.packages import write_package
from tests.support.repo import REPO, TRIBUTARY
from tests.support.sink_child import kill_sink

pytestmark = pytest.mark.slow

TABLES = """
import pipelines.authoring as tb

CHANGE = tb.schema(
    "o_orderkey BIGINT, o_orderstatus STRING, o_totalprice DOUBLE, op STRING, seq BIGINT, changed_at TIMESTAMP"
)
tb.landing("bronze.order_changes", tb.files("order_changes", "json", CHANGE))


@tb.silver(write=tb.cdc("o_orderkey", sequence="seq", values=("o_orderstatus", "o_totalprice")))
def orders(bronze_order_changes):
    return bronze_order_changes.filter("_corrupt_record IS NULL").select(
        "o_orderkey", "o_orderstatus", "o_totalprice", "op", "seq", "changed_at"
    )


DB = tb.setting("SINK_DB_URL", "")
tb.sink("changes_to_kafka_{tag}", "bronze.order_changes", to=tb.kafka_topic("changes_{tag}"))
tb.sink("orders_to_kafka_{tag}", "silver.orders", to=tb.kafka_topic("orders_{tag}"))
tb.sink("changes_to_pg_{tag}", "bronze.order_changes", to=tb.jdbc_table(DB, "app.changes_{tag}"))
tb.sink("orders_to_pg_{tag}", "silver.orders", to=tb.jdbc_table(DB, "app.orders_{tag}"))
SHARED = tb.setting("SINK_DELTA_ROOT", "/nowhere")
tb.sink("changes_to_delta_{tag}", "bronze.order_changes", to=tb.table_path("delta", SHARED + "/changes_{tag}"))
tb.sink("orders_to_delta_{tag}", "silver.orders", to=tb.table_path("delta", SHARED + "/orders_{tag}"))
"""

KEYS = 40
DELETED = [k for k in range(3, KEYS, 7) if k % 5]  # keys the second landing deletes (and does not update)
_START = datetime(2026, 3, 1)


def _change(key: int, op: str, seq: int, status: str = "O", price: float = 0.0) -> dict:
    values = {"o_orderstatus": status, "o_totalprice": price} if op != "D" else {}
    return {
        "o_orderkey": key,
        **values,
        "op": op,
        "seq": seq,
        "changed_at": (_START + timedelta(hours=seq)).isoformat(),
    }


def _landings() -> list[list[dict]]:
    first = [_change(k, "I", 1, "FOP"[k % 3], float(k)) for k in range(KEYS)]
    second = [_change(k, "U", 2, "F", float(k + 100)) for k in range(0, KEYS, 5)]
    second += [_change(k, "D", 2) for k in DELETED]
    second += [_change(k, "I", 1, "P", 7.5) for k in range(KEYS, KEYS + 6)]
    third = [_change(k, "U", 3, "O", float(k + 200)) for k in range(0, KEYS, 10)]
    third += [_change(k, "I", 3, "F", 1.25) for k in range(3, KEYS, 14)]  # deleted keys inserted again
    return [first, second, third]


def _live(landings: list[list[dict]]) -> dict[int, tuple]:
    latest: dict[int, dict] = {}
    for line in sorted((line for lines in landings for line in lines), key=lambda line: line["seq"]):
        latest[line["o_orderkey"]] = line
    return {k: (v["o_orderstatus"], v["o_totalprice"]) for k, v in latest.items() if v["op"] != "D"}


def _lines(landings: list[list[dict]]) -> Counter:
    return Counter((line["o_orderkey"], line["seq"], line["op"]) for lines in landings for line in lines)


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    """A PostgreSQL server with an `app` database: its URL, password included."""
    folder = Path(tempfile.mkdtemp(prefix="tributary-sinks-"))
    folder.chmod(0o711)  # PostgreSQL runs as its own user, which must reach its data folder
    try:
        server = postgres.start(folder, free_port(), databases=("app",))
        yield f"postgresql://{postgres.ROLE}:{server.password}@127.0.0.1:{server.port}/app"
    finally:
        postgres.stop(folder)
        shutil.rmtree(folder, ignore_errors=True)


def _home(settings: Settings, broker: Broker, database: str, monkeypatch, tmp_path: Path, tag: str):
    monkeypatch.setenv("TRIBUTARY_SINK_DB_URL", database)
    monkeypatch.setenv("TRIBUTARY_KAFKA_BOOTSTRAP", broker.bootstrap)
    monkeypatch.setenv("TRIBUTARY_SINK_DELTA_ROOT", str(tmp_path / "shared"))
    settings = replace(settings, kafka=replace(settings.kafka, bootstrap=broker.bootstrap))
    packages = tmp_path / "packages"
    package = write_package(packages, f"sinks_{tag}", {"tables.py": TABLES.replace("{tag}", tag)})
    return settings, packages, package, load_registry([package])


def _land(settings: Settings, i: int, lines: list[dict]) -> None:
    folder = settings.landing / "order_changes"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{i}.json").write_text("".join(json.dumps(line) + "\n" for line in lines))


def _first_landing(spark, settings: Settings, registry) -> list[list[dict]]:
    """The three landings; the first landed and its tables run."""
    landings = _landings()
    _land(settings, 0, landings[0])
    run_pipeline(spark, settings, registry)
    return landings


def _messages(bootstrap: str, topic: str) -> list[tuple[str | None, dict | None]]:
    """Every committed message of `topic`, partition by partition (read_committed, as librdkafka reads by default)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sink-test", "isolation.level": "read_committed"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        out = []
        deadline = time.monotonic() + 60
        for p in sorted(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            if high <= low:
                continue  # empty (a consumer's position is not a number before its first message)
            consumer.assign([TopicPartition(topic, p, low)])
            while consumer.position([TopicPartition(topic, p)])[0].offset < high:
                assert time.monotonic() < deadline, f"{topic}[{p}] not readable to offset {high} (an open transaction?)"
                for m in consumer.consume(500, 0.5):
                    assert m.error() is None, m.error()
                    key = m.key().decode() if m.key() is not None else None
                    out.append((key, json.loads(m.value()) if m.value() is not None else None))
        return out
    finally:
        consumer.close()


def _compacted(messages: list[tuple[str | None, dict | None]]) -> dict[int, tuple]:
    latest: dict[int, dict | None] = {}
    for key, value in messages:
        latest[json.loads(key)["o_orderkey"]] = value
    return {k: (v["o_orderstatus"], v["o_totalprice"]) for k, v in latest.items() if v is not None}


def _pg(database: str, query: str) -> list[tuple]:
    connection = psycopg2.connect(database)
    try:
        with connection, connection.cursor() as cur:
            cur.execute(query)
            return sorted(cur.fetchall())
    finally:
        connection.close()


def _delta(root: Path, name: str) -> list[dict]:
    return DeltaTable(str(root / name)).to_pyarrow_table().to_pylist()


def _destinations(database: str, bootstrap: str, tag: str, shared: Path) -> dict[str, object]:
    """What each of the six destinations holds, in the shape its expectation takes."""
    changes = _messages(bootstrap, f"changes_{tag}")
    return {
        "changes_to_kafka": Counter((v["o_orderkey"], v["seq"], v["op"]) for _, v in changes),
        "changes_keys": {k for k, _ in changes},
        "orders_to_kafka": _compacted(_messages(bootstrap, f"orders_{tag}")),
        "changes_to_pg": Counter(_pg(database, f"SELECT o_orderkey, seq, op FROM app.changes_{tag}")),
        "orders_to_pg": {
            k: (s, p)
            for k, s, p in _pg(database, f"SELECT o_orderkey, o_orderstatus, o_totalprice FROM app.orders_{tag}")
        },
        "changes_to_delta": Counter((r["o_orderkey"], r["seq"], r["op"]) for r in _delta(shared, f"changes_{tag}")),
        "orders_to_delta": {
            r["o_orderkey"]: (r["o_orderstatus"], r["o_totalprice"]) for r in _delta(shared, f"orders_{tag}")
        },
    }


def _expected(landings: list[list[dict]]) -> dict[str, object]:
    live = _live(landings)
    return {
        "changes_to_kafka": _lines(landings),
        "changes_keys": {None},
        "orders_to_kafka": live,
        "changes_to_pg": _lines(landings),
        "orders_to_pg": live,
        "changes_to_delta": _lines(landings),
        "orders_to_delta": live,
    }


def _no_session(*_args: object):
    raise AssertionError("a sink with nothing new asked for a Spark session")


def test_sinks_deliver_every_change_once(spark, format_settings, broker, database, monkeypatch, tmp_path):
    tag = format_settings.table_format
    settings, _, _, registry = _home(format_settings, broker, database, monkeypatch, tmp_path, tag)
    assert {s.name: getattr(s.destination, "keys", ()) for s in registry.sinks} == {
        f"changes_to_kafka_{tag}": (),
        f"orders_to_kafka_{tag}": ("o_orderkey",),  # the CDC table's key, inferred
        f"changes_to_pg_{tag}": (),
        f"orders_to_pg_{tag}": ("o_orderkey",),
        f"changes_to_delta_{tag}": (),
        f"orders_to_delta_{tag}": ("o_orderkey",),
    }
    landings = _landings()
    for i, lines in enumerate(landings):
        _land(settings, i, lines)
        run_pipeline(spark, settings, registry)
        reports, failures = run_sinks(spark, settings, registry)
        assert not failures, failures
        by_name = {r.sink.rsplit("_", 1)[0]: r for r in reports}
        assert {by_name[n].rows for n in ("changes_to_kafka", "changes_to_pg", "changes_to_delta")} == {len(lines)}
        assert {r.mode for r in reports} == {"first" if i == 0 else "changes"}
        if i == 1:  # keys deleted by the CDC feed reach the keyed destinations as deletes
            assert {by_name[n].deleted for n in ("orders_to_pg", "orders_to_kafka", "orders_to_delta")} == {
                len(DELETED)
            }
        assert _destinations(database, broker.bootstrap, tag, tmp_path / "shared") == _expected(landings[: i + 1]), (
            f"after landing {i}"
        )
        for sink in registry.sinks:
            checked = reconcile(settings, registry, sink)
            assert checked.passed, checked.description

    # Nothing new: every sink is unchanged, sends nothing, and needs no Spark session.
    with monkeypatch.context() as patched:
        patched.setattr(iceberg, "get_spark", _no_session)
        reports, failures = run_sinks(_no_session, settings, registry)
    assert not failures and {r.mode for r in reports} == {"unchanged"}, reports
    assert _destinations(database, broker.bootstrap, tag, tmp_path / "shared") == _expected(landings)

    # As Dagster assets: one per sink, downstream of its table, each with a passing delivered-every-row check.
    assets = build_sink_assets(registry)
    assert {a.key.path[1]: [k.path for k in a.dependency_keys] for a in assets} == {
        s.name: [["silver" if "orders_" in s.name else "bronze", s.table.split(".")[1]]] for s in registry.sinks
    }
    resource = SparkResource(home=str(settings.home), catalog_name=settings.catalog_name)
    result = materialize(assets, resources={"spark": resource})
    assert result.success
    checks = result.get_asset_check_evaluations()
    assert len(checks) == 6 and all(c.passed and c.check_name == DELIVERED_CHECK for c in checks), checks
    compared = {c.asset_key.path[1]: c.metadata["table_rows"].value for c in checks if "table_rows" in c.metadata}
    # A keyed topic holds a message per change, not a row per row: it is the one not compared.
    assert compared == {
        f"orders_to_pg_{tag}": len(_live(landings)),
        f"changes_to_kafka_{tag}": sum(map(len, landings)),
        f"changes_to_pg_{tag}": sum(map(len, landings)),
        f"orders_to_delta_{tag}": len(_live(landings)),
        f"changes_to_delta_{tag}": sum(map(len, landings)),
    }, [c.description for c in checks]


def test_a_sink_killed_before_inside_or_after_its_commit_delivers_once(
    spark, settings_factory, broker, database, monkeypatch, tmp_path
):
    settings, packages, package, registry = _home(settings_factory(), broker, database, monkeypatch, tmp_path, "kill")
    landings = _first_landing(spark, settings, registry)
    assert not run_sinks(spark, settings, registry)[1]
    _land(settings, 1, landings[1])
    run_pipeline(spark, settings, registry)
    env = {"TRIBUTARY_SINK_DB_URL": database, "TRIBUTARY_KAFKA_BOOTSTRAP": broker.bootstrap}
    kills = {
        "orders_to_kafka_kill": ("before", "inside", "after"),
        "changes_to_pg_kill": ("before", "inside", "after"),
        "orders_to_pg_kill": ("inside",),
        "changes_to_kafka_kill": ("inside",),
        "orders_to_delta_kill": ("after",),
        "changes_to_delta_kill": ("before",),
    }
    for sink, points in kills.items():
        for point in points:
            kill_sink(settings, packages, package, sink, point, env)
    reports, failures = run_sinks(spark, settings, registry)
    assert not failures, failures
    modes = {r.sink: r.mode for r in reports}
    # Killed after their commit, these had delivered: their next run finds nothing new.
    assert modes == {
        "orders_to_kafka_kill": "unchanged",
        "changes_to_pg_kill": "unchanged",
        "orders_to_pg_kill": "changes",
        "changes_to_kafka_kill": "changes",
        "orders_to_delta_kill": "unchanged",
        "changes_to_delta_kill": "changes",
    }
    assert _destinations(database, broker.bootstrap, "kill", tmp_path / "shared") == _expected(landings[:2])


def test_an_unreachable_destination_stops_only_its_sink_and_the_next_run_catches_up(
    spark, settings_factory, broker, database, monkeypatch, tmp_path
):
    settings, _, _, registry = _home(settings_factory(), broker, database, monkeypatch, tmp_path, "down")
    landings = _first_landing(spark, settings, registry)
    pg, kafka = (next(s for s in registry.sinks if s.name == f"{n}_down") for n in ("orders_to_pg", "changes_to_kafka"))
    dead = f"postgresql://app:not-this-one@127.0.0.1:{free_port()}/app"
    with pytest.raises(SinkError) as down:
        run_sink(spark, settings, registry, replace(pg, destination=replace(pg.destination, url=dead)))
    line = str(down.value)
    assert "\n" not in line and "not-this-one" not in line
    assert line.startswith("sink orders_to_pg_down: cannot reach PostgreSQL table app.orders_down at 127.0.0.1:")
    assert line.endswith("start the database or fix the sink's URL, and the next run delivers what was missed")
    no_broker = replace(
        settings, kafka=replace(settings.kafka, bootstrap=f"127.0.0.1:{free_port()}", timeout_seconds=2)
    )
    with pytest.raises(SinkError) as no_kafka:
        run_sink(spark, no_broker, registry, kafka)
    assert str(no_kafka.value).startswith(
        f"sink changes_to_kafka_down: Kafka brokers {no_broker.kafka.bootstrap} did not answer"
    )

    # The tables are committed all the same; the next run with the destinations back delivers everything once.
    _land(settings, 1, landings[1])
    run_pipeline(spark, settings, registry)
    reports, failures = run_sinks(spark, settings, registry)
    assert not failures and {r.mode for r in reports} == {"first"}, reports
    assert _destinations(database, broker.bootstrap, "down", tmp_path / "shared") == _expected(landings[:2])


def test_tributary_run_delivers_the_demos_daily_revenue_and_a_failed_sink_exits_1_with_one_line(
    broker, database, tmp_path
):
    """The demo's own sinks (declared when their settings are given), through the CLI: a sink whose database cannot
    be reached fails alone with one line and exit 1, the tables and the other sink committed; the next run with
    the database back delivers everything to it once."""
    home = tmp_path / "demo"
    generate(home / "landing", rows=2000, files=2, seed=3)
    env = {
        **short_lived(dict(os.environ)),
        "TRIBUTARY_HOME": str(home),
        "TRIBUTARY_KAFKA_BOOTSTRAP": broker.bootstrap,
        "TRIBUTARY_REVENUE_TOPIC": "demo_revenue",
        "TRIBUTARY_APP_DB_URL": f"postgresql://app:wrong@127.0.0.1:{free_port()}/app",
    }
    run = [TRIBUTARY, "run", "gold.daily_revenue", "--with-upstream"]
    first = subprocess.run(run, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 1, first.stderr[-3000:]
    failed = [line for line in first.stderr.splitlines() if line.startswith("tributary: error:")]
    assert len(failed) == 1 and "wrong" not in first.stderr, first.stderr[-3000:]
    assert failed[0].startswith(
        "tributary: error: the run committed its tables, but sink daily_revenue_to_app: cannot reach PostgreSQL "
        "table app.daily_revenue at 127.0.0.1:"
    )
    delivered = [line for line in first.stdout.splitlines() if line.startswith("sink ")]
    assert len(delivered) == 1 and delivered[0].startswith("sink daily_revenue_to_kafka: "), first.stdout

    again = subprocess.run(run, cwd=REPO, env={**env, "TRIBUTARY_APP_DB_URL": database}, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert [line.split(":")[0] for line in again.stdout.splitlines() if line.startswith("sink ")] == [
        "sink daily_revenue_to_app"  # the Kafka sink had nothing new
    ]
    settings = Settings.from_env(home=home)
    revenue = pyiceberg_catalog(settings).load_table("gold.daily_revenue").scan().to_arrow().to_pylist()
    keys = ("event_date", "category", "currency")
    expected = {tuple(str(r[k]) for k in keys): (r["orders"], str(r["revenue"])) for r in revenue}
    assert len(expected) > 10
    held = _pg(database, "SELECT event_date, category, currency, orders, revenue FROM app.daily_revenue")
    assert {(str(d), c, u): (o, str(r)) for d, c, u, o, r in held} == expected
    latest = {}
    for key, value in _messages(broker.bootstrap, "demo_revenue"):
        latest[tuple(json.loads(key)[k] for k in keys)] = value
    assert {k: (v["orders"], f"{v['revenue']:.2f}") for k, v in latest.items() if v is not None} == expected
