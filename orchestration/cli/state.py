"""`tributary state TABLE`: what a table's streams keep between runs (windows waiting for their watermark, open
session visits, the keys a deduplication has seen, a join's buffered rows), read from its checkpoints with Spark's
state data source (`pipelines.ops.state`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from infra.settings import Settings


def _state(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines.datasets import default_registry
    from pipelines.ops.state import store_rows, table_state

    registry = default_registry()
    spec = registry.get(args.table)  # an unknown table is refused before Spark starts
    if not any(_has_run(settings, spec.name, flow.name) for flow in spec.all_flows()):
        print(f"{spec.name}: has not run yet, so it keeps no state (run 'tributary run {spec.name}')")
        return 0
    from infra.spark import get_spark

    spark = get_spark(settings)
    for flow in table_state(spark, settings, registry, spec.name):
        where = "" if flow.flow == "main" else f" (flow {flow.flow})"
        print(f"{flow.table}{where}: checkpoint {flow.checkpoint}, last committed batch {flow.last_batch}")
        if not flow.stores:
            print("  no state: this flow's query has no window, session, deduplication, join or stateful function")
            continue
        for store in flow.stores:
            keys, rows = store_rows(spark, flow.checkpoint, store, args.rows)
            print(
                f"  operator {store.operator_id} {store.operator}, store {store.store}: {keys} keys in "
                f"{store.partitions} partitions, batches {store.first_batch}-{store.last_batch}"
            )
            for key, value in rows:
                print(f"    {key} -> {value}")
            if keys > len(rows):
                print(f"    ... {keys - len(rows)} more (--rows N shows more)")
    return 0


def _has_run(settings: Settings, table: str, flow: str) -> bool:
    """Whether the flow has a checkpoint folder (it has run at least once)."""
    from pipelines.sources.base import flow_checkpoint

    return flow_checkpoint(settings, table, flow).is_dir()


def register(
    sub: argparse._SubParsersAction, handlers: dict[str, Callable[[argparse.Namespace, Settings], int]]
) -> None:
    """Add the `state` command and its handler."""
    state = sub.add_parser("state", help="what a table's streams keep between runs (Spark's state data source)")
    state.add_argument("table", help="a table such as gold.ad_clicks")
    state.add_argument("--rows", type=int, default=10, help="keys to show per state store (default 10)")
    handlers["state"] = _state
