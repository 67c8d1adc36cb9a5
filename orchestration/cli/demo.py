"""`tributary demo` (what `make demo` runs): land the sample data and materialize every asset through Dagster, with
the events from files or a Kafka topic and the tables on disk or in a bucket."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from infra.kafka import KafkaSettings
from infra.settings import Settings


def _demo_broker(settings: Settings, stack: ExitStack) -> Settings:
    """Feed the demo's events to Kafka: the test broker under the home (unless TRIBUTARY_KAFKA_BOOTSTRAP names one),
    stopped when the demo ends; bronze.events then reads the `events` topic."""
    from infra.kafka_broker import start_broker
    from pipelines.datasets import feed_demo_topic

    os.environ["TRIBUTARY_EVENTS_SOURCE"] = "kafka"
    if not os.environ.get("TRIBUTARY_KAFKA_BOOTSTRAP"):
        broker = start_broker(settings.home / "kafka-broker")
        stack.callback(broker.stop)
        os.environ["TRIBUTARY_KAFKA_BOOTSTRAP"] = broker.bootstrap
        print(f"started the Kafka test broker on {broker.bootstrap} (data under {broker.data_dir})")
    settings = replace(settings, kafka=KafkaSettings.from_env())
    print(feed_demo_topic(settings.landing, settings.kafka))
    return settings


DEMO_BUCKET = "tributary"


def _demo_object_store(settings: Settings, stack: ExitStack) -> Settings:
    """Keep the demo's tables in a bucket: the S3 test server under the home (unless TRIBUTARY_WAREHOUSE already
    names a bucket), stopped when the demo ends."""
    from infra.s3_server import start_s3_server

    if settings.warehouse_url is None:
        server = start_s3_server(settings.home / "s3-server", settings.jar_cache)
        stack.callback(server.stop)
        server.create_bucket(DEMO_BUCKET)
        os.environ["TRIBUTARY_WAREHOUSE"] = f"s3a://{DEMO_BUCKET}/warehouse"
        os.environ.update(server.store().environment())
        print(f"started the S3 test server on {server.endpoint} (buckets under {server.data_dir / 'buckets'})")
    settings = Settings.from_env(home=settings.home)
    print(f"tables in {settings.warehouse_url} on {settings.object_store.where()}")
    return settings


def _record_class_archive_later(settings: Settings) -> None:
    """Start `tributary setup --class-archive` in the background when the driver JVM's class archive is missing
    (`infra.class_archive`): recorded after the first demo, not before it, it costs the demo nothing."""
    from infra.class_archive import archive_path

    if archive_path(settings).is_file():
        return
    log = settings.home / "logs" / "class-archive.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [str(Path(sys.executable).parent / "tributary"), "setup", "--class-archive"]
    with open(log, "w") as out:
        quiet = {"stdin": subprocess.DEVNULL, "stdout": out, "stderr": subprocess.STDOUT}
        subprocess.Popen(command, start_new_session=True, **quiet)
    print(f"recording the JVM class archive in the background (about half a minute; later JVMs start faster): {log}")


def _demo(args: argparse.Namespace, settings: Settings) -> int:
    """Generate the sample landing zone (once) and materialize every asset through Dagster."""
    from orchestration.cli.progress import shown
    from orchestration.cli.summary import format_numbers, numbers_lines
    from orchestration.run import materialize_pipeline
    from pipelines.datasets import land_demo

    os.environ.pop("TRIBUTARY_DATASETS", None)  # the demo's own datasets, whatever the project configures
    settings.require_writable("landing")
    for line in land_demo(settings.landing, args.rows, args.files, args.seed):
        print(line)
    started_with_store = settings.warehouse_url is not None
    with ExitStack() as stack:
        if args.storage == "s3":
            settings = _demo_object_store(settings, stack)
        if args.source == "kafka":
            settings = _demo_broker(settings, stack)
        started = time.perf_counter()
        with shown():
            numbers = materialize_pipeline(settings)
    print(format_numbers(numbers))
    lines = numbers_lines(numbers)
    if lines:
        print("\n" + "\n".join(lines))
    print(f"\npipeline materialized through Dagster in {time.perf_counter() - started:.1f} s")
    _record_class_archive_later(settings)
    if args.storage == "s3" and not started_with_store:
        print(
            f"\nThe S3 test server stopped with the demo; its buckets stay under {settings.home / 's3-server'} "
            "(running the demo again starts it and writes nothing new). To query tables in a bucket, point "
            "TRIBUTARY_WAREHOUSE and TRIBUTARY_S3_* at a store that keeps running (docs/storage.md)."
        )
        return 0
    print("\nNext:")
    print("  make ui                                   # Dagster UI (dagster dev) on http://127.0.0.1:3000")
    print("  .venv/bin/tributary sql 'SELECT * FROM gold.daily_revenue ORDER BY revenue DESC LIMIT 10'")
    print("  TRIBUTARY_SQL_PASSWORD=... .venv/bin/tributary serve start   # gold in PostgreSQL (make setup-full)")
    return 0


def register(
    sub: argparse._SubParsersAction, handlers: dict[str, Callable[[argparse.Namespace, Settings], int]]
) -> None:
    """Add the `demo` subcommand."""
    demo = sub.add_parser("demo", help="generate sample data and materialize every asset through Dagster")
    demo.add_argument("--rows", type=int, default=100_000)
    demo.add_argument("--files", type=int, default=20)
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument(
        "--source", choices=("files", "kafka"), default="files", help="where bronze.events reads the events from"
    )
    demo.add_argument(
        "--storage",
        choices=("local", "s3"),
        default="local",
        help="where the tables live: the home's warehouse folder, or a bucket (TRIBUTARY_WAREHOUSE=s3a://..., "
        "else an S3 test server started and stopped by the demo)",
    )
    handlers["demo"] = _demo
