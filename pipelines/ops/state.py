"""A table's streaming state, read from its checkpoints with Spark's state data source (`state-metadata` for the
stateful operators and their stores, `statestore` for the keys and values), without running the table.

Windows, session windows, deduplication, stream-stream joins and `applyInPandasWithState` functions keep state
between runs; `tributary state TABLE` shows what each flow of a table holds, e.g. the open visits a session
summary has not emitted yet or the impressions a join still waits to match.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from infra.settings import Settings
from pipelines.io.checkpoints import last_committed_batch
from pipelines.sources.base import flow_checkpoint
from pipelines.spec.registry import Registry


@dataclass(frozen=True)
class StateStore:
    """One state store of a stateful operator in a flow's checkpoint (a row of Spark's `state-metadata`)."""

    operator_id: int
    operator: str
    store: str
    partitions: int
    first_batch: int
    last_batch: int


@dataclass(frozen=True)
class FlowState:
    """What one flow of a table keeps: its checkpoint, last committed batch and state stores (empty when its
    query keeps no state)."""

    table: str
    flow: str
    checkpoint: Path
    last_batch: int | None
    stores: tuple[StateStore, ...]


def table_state(spark: SparkSession, settings: Settings, registry: Registry, table: str) -> list[FlowState]:
    """The state of every flow of `table` that has run (a ConfigError for a table not in `registry`)."""
    spec = registry.get(table)
    flows = []
    for flow in spec.all_flows():
        checkpoint = flow_checkpoint(settings, table, flow.name)
        batch = last_committed_batch(checkpoint) if checkpoint.is_dir() else None
        if batch is None:
            continue
        stores: tuple[StateStore, ...] = ()
        if (checkpoint / "state").is_dir():
            rows = spark.read.format("state-metadata").load(str(checkpoint)).collect()
            stores = tuple(
                sorted(
                    (
                        StateStore(
                            r["operatorId"],
                            r["operatorName"],
                            r["stateStoreName"],
                            r["numPartitions"],
                            r["minBatchId"],
                            r["maxBatchId"],
                        )
                        for r in rows
                    ),
                    key=lambda s: (s.operator_id, s.store),
                )
            )
        flows.append(FlowState(table, flow.name, checkpoint, batch, stores))
    return flows


def store_rows(
    spark: SparkSession, checkpoint: Path, store: StateStore, limit: int
) -> tuple[int, list[tuple[str, str]]]:
    """How many keys `store` holds at its last batch, and up to `limit` (key, value) pairs as JSON, in key order."""
    state = (
        spark.read.format("statestore")
        .option("operatorId", store.operator_id)
        .option("storeName", store.store)
        .option("batchId", store.last_batch)
        .load(str(checkpoint))
    )
    pairs = state.select(F.to_json("key").alias("key"), F.to_json("value").alias("value")).orderBy("key")
    return state.count(), [(r["key"], r["value"]) for r in pairs.limit(limit).collect()]
