"""Sinks against what a user would write by hand, same rows, same run: Tributary's Kafka sink against Spark's own
Kafka sink, and its PostgreSQL sink against a plain `foreachBatch` JDBC write (`DataFrame.write.jdbc`).

The rows are the demo's `bronze.events` (every landed line, lineage columns included), delivered whole (a sink's
first delivery). Ours run in this process's warm session from the table; the plain jobs run in a session of
their own, started before the clock, over a Parquet copy of the same rows cached in memory, and are timed from
the write's start to its end. Spark's Kafka sink is at-least-once (a replayed batch sends its rows again) and
the JDBC write commits per partition: what ours add is the exactly-once transaction and its ledger.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from infra.deploy import postgres
from infra.jars import KAFKA_JARS, POSTGRES_JDBC
from infra.kafka import KafkaSettings
from infra.kafka_broker import start_broker
from infra.maven import fetch_jars
from infra.ports import free_port
from infra.settings import Settings
from infra.spark import get_spark
from pipelines.datasets import default_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.deliver.jdbc_table import JdbcTable
from pipelines.deliver.kafka_topic import KafkaTopic
from pipelines.deliver.run import run_sink
from pipelines.io.formats import table_format
from pipelines.run.pipeline import run_pipeline
from pipelines.spec.delivery import SinkSpec

TABLE = "bronze.events"

# The hand-written jobs: read the rows, cache them, then time only the write.
_PLAIN = """
import json, sys, time
from pyspark.sql import SparkSession, functions as F
parquet, jars, bootstrap, topic, jdbc_url, table = sys.argv[1:7]
spark = (SparkSession.builder.master("local[*]").config("spark.ui.enabled", "false")
         .config("spark.jars", jars).config("spark.driver.extraClassPath", jars.replace(",", ":"))
         .config("spark.sql.session.timeZone", "UTC").getOrCreate())
rows = spark.read.parquet(parquet).cache()
rows.count()
started = time.perf_counter()
(rows.select(F.to_json(F.struct(*rows.columns)).alias("value")).write.format("kafka")
     .option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save())
kafka = time.perf_counter() - started
started = time.perf_counter()
rows.write.jdbc(jdbc_url, table, mode="append", properties={"driver": "org.postgresql.Driver"})
jdbc = time.perf_counter() - started
print(json.dumps({"kafka": kafka, "jdbc": jdbc}))
"""


def _plain(settings: Settings, parquet: Path, bootstrap: str, server: postgres.Postgres) -> dict[str, float]:
    jars = fetch_jars([*KAFKA_JARS, POSTGRES_JDBC], settings.jar_cache)
    jdbc_url = f"jdbc:postgresql://127.0.0.1:{server.port}/app?user={postgres.ROLE}&password={server.password}"
    args = [str(parquet), ",".join(map(str, jars)), bootstrap, "plain_events", jdbc_url, "public.plain_events"]
    done = subprocess.run([sys.executable, "-c", _PLAIN, *args], capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"the plain sink jobs failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_sinks(settings: Settings, rows: int = 200_000, files: int = 4) -> dict[str, Any]:
    """Seconds of each sink's first delivery of `rows` events, against the hand-written write, as ratios."""
    generate(settings.landing, rows=rows, files=files, seed=21)
    spark = get_spark(settings)
    registry = default_registry()
    run_pipeline(spark, settings, registry, [TABLE])
    parquet = settings.home / "plain-rows"
    table_format(settings).read(spark, TABLE).write.parquet(str(parquet))
    folder = Path(tempfile.mkdtemp(prefix="tributary-bench-sinks-"))
    folder.chmod(0o711)  # PostgreSQL runs as its own user
    broker = start_broker(settings.home / "broker")
    try:
        server = postgres.start(folder, free_port(), databases=("app",))
        url = f"postgresql://{postgres.ROLE}:{server.password}@127.0.0.1:{server.port}/app"
        home = replace(settings, kafka=KafkaSettings(bootstrap=broker.bootstrap, timeout_seconds=60))
        ours = {}
        for name, destination in (("kafka", KafkaTopic("our_events")), ("jdbc", JdbcTable(url, "public.our_events"))):
            sink = registry.add_sink(SinkSpec(f"bench_{name}", TABLE, destination))
            started = time.perf_counter()
            report = run_sink(spark, home, registry, sink)
            ours[name] = {"seconds": round(time.perf_counter() - started, 3), "rows": report.rows}
        plain = _plain(settings, parquet, broker.bootstrap, server)
    finally:
        broker.stop()
        postgres.stop(folder)
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "rows": ours["kafka"]["rows"],
        "ours": ours,
        "plain_seconds": {k: round(v, 3) for k, v in plain.items()},
        "ratio_kafka_vs_spark_sink": round(ours["kafka"]["seconds"] / plain["kafka"], 2),
        "ratio_jdbc_vs_foreach_batch": round(ours["jdbc"]["seconds"] / plain["jdbc"], 2),
    }
