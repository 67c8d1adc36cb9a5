"""Child process for the sink kill tests: runs one sink of a dataset package and SIGKILLs its whole process group
(with the JVM) at a point of its delivery.

Usage: python -m tests.support.sink_child HOME CATALOG PACKAGES PACKAGE SINK POINT
  before  the changes are read, nothing is sent yet
  inside  inside the destination's transaction: some rows sent (Kafka) or written (PostgreSQL), not committed
  after   right after the destination's commit, before the run reports it
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
from pathlib import Path

from infra.settings import Settings
from infra.spark import get_spark
from pipelines.authoring.load import load_registry
from pipelines.deliver import jdbc_table, kafka_topic
from pipelines.deliver.run import run_sink
from tests.support.killed_child import run_killed_child

POINTS = ("before", "inside", "after")


def _kill(*_args: object) -> None:
    os.killpg(os.getpgid(0), signal.SIGKILL)


def kill_sink(settings: Settings, packages: Path, package: str, sink: str, point: str, env: dict[str, str]) -> None:
    """Run `sink` in a child process that must be SIGKILLed at `point`; fail the test if it is not."""
    arguments = (str(settings.home), settings.catalog_name, str(packages), package, sink, point)
    run_killed_child(
        settings, "tests.support.sink_child", *arguments, env={**env, "TRIBUTARY_TABLE_FORMAT": settings.table_format}
    )


def _patch(destination: type, point: str) -> None:
    deliver = destination.deliver
    if point == "before":
        destination.deliver = _kill  # type: ignore[method-assign]
    elif point == "after":

        def delivered_then_killed(self, settings, delivery):
            deliver(self, settings, delivery)
            _kill()

        destination.deliver = delivered_then_killed  # type: ignore[method-assign]
    elif destination is kafka_topic.KafkaTopic:
        send, sent = kafka_topic._send, []

        def killed_after_two(producer, topic, key, value):
            send(producer, topic, key, value)
            sent.append(topic)
            if len(sent) == 2:
                producer.flush(10)  # the two messages reach the broker, inside the open transaction
                _kill()

        kafka_topic._send = killed_after_two
    else:
        write = jdbc_table.JdbcTable._write

        def written_then_killed(self, cur, rows, deleted):
            write(self, cur, rows, deleted)
            _kill()

        jdbc_table.JdbcTable._write = written_then_killed  # type: ignore[method-assign]


def main() -> None:
    home, catalog, packages, package, name, point = sys.argv[1:7]
    assert point in POINTS, point
    settings = dataclasses.replace(Settings.from_env(home=home).with_home(Path(home)), catalog_name=catalog)
    sys.path.insert(0, packages)
    registry = load_registry([package])
    sink = next(s for s in registry.sinks if s.name == name)
    _patch(type(sink.destination), point)
    run_sink(get_spark(settings), settings, registry, sink)
    sys.exit(3)  # reaching here means the kill point was never hit


if __name__ == "__main__":
    main()
