"""Child process for Kafka kill tests: runs `bronze.orders` from a topic and SIGKILLs its process group (with the
JVM) around the N-th table commit of the run.

Usage: python -m tests.support.kafka_child HOME CATALOG BOOTSTRAP TOPIC BATCH_SIZE N POINT
POINT: `before` (the N-th batch's messages are read, its commit not made), `after` (committed, nothing after) or
`none` (no kill: a plain run, for races).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
from pathlib import Path

from infra.kafka import KafkaSettings
from infra.settings import Settings
from infra.spark import get_spark
from pipelines.io.formats import TableFormats
from pipelines.run.runner import run_table
from tests.support.kafka_registry import kafka_registry


def main() -> None:
    home, catalog, bootstrap, topic, size, n, point = sys.argv[1:8]
    settings = dataclasses.replace(
        Settings.from_env(home=Path(home)), catalog_name=catalog, kafka=KafkaSettings(bootstrap=bootstrap)
    )
    commits = {"n": 0}
    append = TableFormats.append

    def killing(self, df, *args, **kwargs):
        commits["n"] += 1
        if point == "before" and commits["n"] == int(n):
            df.count()  # the batch's messages are read on the executors, then the process dies before its commit
            os.killpg(os.getpgid(0), signal.SIGKILL)
        added = append(self, df, *args, **kwargs)
        if point == "after" and commits["n"] == int(n):
            os.killpg(os.getpgid(0), signal.SIGKILL)
        return added

    TableFormats.append = killing  # type: ignore[method-assign]
    spec = kafka_registry(topic, max_offsets_per_batch=int(size)).get("bronze.orders")
    run_table(get_spark(settings), settings, spec)


if __name__ == "__main__":
    main()
