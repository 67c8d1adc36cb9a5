"""Delta tables: idempotent appends, delta-spark's stream over them, maintenance that never costs a downstream row,
and tables that an independent reader (delta-rs in a fresh process, DuckDB over its Arrow) reads exactly as
Tributary does."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from infra.errors import ConfigError
from infra.sql.local import LocalEngine
from pipelines.datasets import default_registry
from pipelines.datasets.clickstream.sample_data import generate_clickstream
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io.delta import DeltaFormat
from pipelines.io.formats import table_format
from pipelines.io.iceberg import IcebergFormat
from pipelines.ops.maintenance.cleanup import expire_snapshots
from pipelines.ops.maintenance.procedures import EXPIRE_SNAPSHOTS
from pipelines.ops.maintenance.runner import compact_data_files, run_maintenance
from pipelines.ops.table_health import compaction_reason, file_health
from pipelines.run.pipeline import run_pipeline
from pipelines.run.runner import run_table
from pipelines.spec.registry import Registry
from pipelines.spec.tables import MaintenancePolicy, OutputTable
from tests.support.helpers import rows_of, table
from tests.support.reference import classify, load_landing
from tests.support.repo import REPO

SCHEMA = StructType([StructField("id", LongType()), StructField("name", StringType())])


def _delta(settings):
    return replace(settings, table_format="delta")


def test_replayed_batches_are_skipped_and_the_stream_reads_each_appended_row_once(spark, fresh_settings):
    s = _delta(fresh_settings)
    fmt = DeltaFormat(s)
    fmt.ensure_table(spark, OutputTable("bronze.items", SCHEMA))
    checkpoint = s.home / "feed-checkpoint"
    assert fmt.consumer_caught_up(spark, "bronze.items", checkpoint)  # an empty table owes nothing
    for batch in range(23):
        rows = spark.range(batch * 10, batch * 10 + 10).select("id", F.col("id").cast("string").alias("name"))
        assert fmt.append(rows, "bronze.items", "writer-a", batch) == 10
    assert fmt.committed_batches(spark, "bronze.items", "writer-a", 20) == {20, 21, 22}
    kept = fmt.latest_properties(spark, "bronze.items", "tributary.batch-id")
    assert kept is not None and kept["tributary.batch-id"] == "22" and kept["tributary.writer"] == "writer-a"
    assert fmt.committed_batches(spark, "bronze.items", "writer-b", 0) == set()
    files = fmt.delta_table("bronze.items").file_uris()
    assert not fmt.consumer_caught_up(spark, "bronze.items", checkpoint)
    assert fmt.consumer_position("bronze.items", "reader", checkpoint).snapshot_id is None

    read: list[int] = []

    def stream() -> int:
        query = (
            fmt.read_stream(spark, "bronze.items")
            .writeStream.foreachBatch(lambda df, _: read.extend(r.id for r in df.collect()))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return sum(p["numInputRows"] for p in query.recentProgress)

    assert stream() == 230
    assert sorted(read) == list(range(230))
    current = fmt.delta_table("bronze.items").version()
    assert fmt.consumer_caught_up(spark, "bronze.items", checkpoint)
    assert fmt.consumer_position("bronze.items", "reader", checkpoint).snapshot_id == current
    # The compaction sensor's numbers (no JVM), then OPTIMIZE rewrites every file (dataChange=false): the stream
    # reads nothing from it.
    policy = MaintenancePolicy(min_input_files=2)
    health = file_health(s, "bronze.items", policy)
    assert health.data_files == health.compactable_files == len(files) and compaction_reason(health, policy)
    assert compact_data_files(None, s, "bronze.items", policy)["rewritten_data_files_count"] == len(files)
    assert compaction_reason(file_health(s, "bronze.items", policy), policy) is None
    assert stream() == 0
    assert fmt.read(spark, "bronze.items").count() == 230
    assert fmt.consumer_caught_up(spark, "bronze.items", checkpoint)  # OPTIMIZE appended no rows
    fmt.append(spark.range(1000, 1005).select("id", F.lit("x").alias("name")), "bronze.items", "writer-a", 23)
    assert not fmt.consumer_caught_up(spark, "bronze.items", checkpoint)
    assert stream() == 5
    assert sorted(read) == [*range(230), *range(1000, 1005)]
    assert fmt.consumer_caught_up(spark, "bronze.items", checkpoint)


def test_optimize_and_vacuum_between_silver_runs_cost_silver_nothing(spark, fresh_settings):
    s = _delta(fresh_settings)
    registry = default_registry()
    generate(s.landing, rows=1500, files=2, seed=61)
    run_pipeline(spark, s, registry, ["bronze.events", "silver.events"])
    # Two more bronze commits silver has not read, then compaction and a vacuum that would delete every file no
    # longer current: the files silver still has to read are kept for it.
    for seed in (62, 63):
        generate(s.landing, rows=400, files=1, seed=seed)
        run_table(spark, s, registry.get("bronze.events"))
    compacted = compact_data_files(None, s, "bronze.events", MaintenancePolicy(min_input_files=2))
    assert compacted["rewritten_data_files_count"] > compacted["added_data_files_count"] > 0
    now = datetime.now(UTC)
    vacuumed = run_maintenance(spark, s, registry, "bronze.events", [EXPIRE_SNAPSHOTS], now=now, expire_older_than=now)
    assert any("silver.events" in note for note in vacuumed.notes)
    with pytest.raises(ConfigError, match=r"Delta table.*Iceberg-only.*run_maintenance"):
        expire_snapshots(spark, s, registry, "bronze.events", older_than=now)  # Iceberg's own entry point
    run_table(spark, s, registry.get("silver.events"))

    ref = classify(load_landing(s.landing))
    assert table(spark, s, "silver.events").count() == len(ref.valid_events)
    assert table(spark, s, "silver.events_quarantine").count() == ref.corrupt + ref.invalid
    assert run_table(spark, s, registry.get("silver.events")).skipped
    # Once silver has read them, the compacted-away files go, and bronze reads the same rows.
    before = rows_of(table(spark, s, "bronze.events"))
    freed = run_maintenance(spark, s, registry, "bronze.events", [EXPIRE_SNAPSHOTS], now=now, expire_older_than=now)
    assert freed.steps[EXPIRE_SNAPSHOTS]["deleted_data_files_count"] > 0
    assert rows_of(table(spark, s, "bronze.events")) == before
    assert run_table(spark, s, registry.get("silver.events")).skipped


_READER = """
import json, sys
import duckdb, pyarrow as pa
from deltalake import DeltaTable
out = {}
for name, path in json.loads(sys.argv[1]).items():
    arrow = pa.table(DeltaTable(path).to_pyarrow_table())
    con = duckdb.connect()
    con.register("t", arrow)
    out[name] = {
        "rows": arrow.num_rows,
        "duckdb_rows": con.execute("SELECT count(*) FROM t").fetchone()[0],
        "sum": str(con.execute(f"SELECT sum({sys.argv[2]}) FROM t").fetchone()[0]) if "revenue" in name else None,
        "keys": sorted(map(str, arrow.column(arrow.column_names[0]).to_pylist())),
    }
print(json.dumps(out))
"""


def test_a_second_reader_sees_exactly_what_tributary_wrote(spark, fresh_settings):
    s = _delta(fresh_settings)
    registry = default_registry()
    generate(s.landing, rows=2000, files=2, seed=71)
    generate_clickstream(s.landing, impressions=200, files=2, seed=73)  # customer changes: SCD1 MERGEs delete
    tables = ["bronze.events", "silver.events", "gold.daily_revenue", "silver.customers"]
    run_pipeline(spark, s, registry, tables)
    generate(s.landing, rows=600, files=1, seed=72)  # gold MERGEs over the days it already holds
    run_pipeline(spark, s, registry, tables)
    compact_data_files(None, s, "bronze.events", MaintenancePolicy(min_input_files=2))
    names = [*tables[:3], "silver.events_quarantine", "silver.customers", "silver.customers_history"]
    fmt = DeltaFormat(s)
    paths = {n: str(fmt.location(n)) for n in names}
    proc = subprocess.run(
        [sys.executable, "-c", _READER, json.dumps(paths), "revenue"], cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout)
    for name in names:
        df = table(spark, s, name)
        assert seen[name]["rows"] == seen[name]["duckdb_rows"] == df.count(), name
        assert seen[name]["keys"] == sorted(str(r[0]) for r in df.select(df.columns[0]).collect()), name
    history = table(spark, s, "silver.customers_history")
    key = history.columns[0]
    latest = history.filter("valid_to IS NULL").collect()
    live = {r[key] for r in latest if not r.is_deleted}
    assert len(live) < len(latest), "the sample should delete some customers"
    assert {r[key] for r in table(spark, s, "silver.customers").select(key).collect()} == live  # deletes applied
    revenue = table(spark, s, "gold.daily_revenue").agg(F.sum("revenue")).collect()[0][0]
    assert seen["gold.daily_revenue"]["sum"] == str(revenue)
    ref = classify(load_landing(s.landing))
    gold = {
        (r.event_date, r.category, r.currency): (r.orders, r.units, r.revenue)
        for r in table(spark, s, "gold.daily_revenue").collect()
    }
    assert gold == ref.daily_revenue()


def test_tables_of_both_formats_in_one_pipeline(spark, fresh_settings):
    """Delta bronze -> Iceberg silver -> Delta gold on an Iceberg home: each table is created in its spec's format,
    streams cross formats, and the tables equal the reference."""
    s = fresh_settings
    chosen = {"bronze.events": "delta", "gold.daily_revenue": "delta"}
    registry = Registry([replace(spec, table_format=chosen.get(spec.name)) for spec in default_registry()])
    tables = ["bronze.events", "silver.events", "gold.daily_revenue"]
    for seed in (81, 82):
        generate(s.landing, rows=1200, files=2, seed=seed)
        run_pipeline(spark, s, registry, tables)
    fmt = table_format(s)
    assert {n: fmt.format_of(n) for n in [*tables, "silver.events_quarantine", "bronze.events_files"]} == {
        "bronze.events": "delta",
        "bronze.events_files": "delta",
        "silver.events": "iceberg",
        "silver.events_quarantine": "iceberg",
        "gold.daily_revenue": "delta",
    }
    assert DeltaFormat(s).exists(None, "gold.daily_revenue") and not IcebergFormat(s).exists(None, "gold.daily_revenue")
    ref = classify(load_landing(s.landing))
    assert table(spark, s, "silver.events").count() == len(ref.valid_events)
    gold = {
        (r.event_date, r.category, r.currency): (r.orders, r.units, r.revenue)
        for r in table(spark, s, "gold.daily_revenue").collect()
    }
    assert gold == ref.daily_revenue()
    assert all(r.skipped for r in run_pipeline(spark, s, registry, tables))
    answered = LocalEngine(s).query("SELECT sum(orders) FROM gold.daily_revenue").rows
    assert answered == [(sum(v[0] for v in ref.daily_revenue().values()),)]
