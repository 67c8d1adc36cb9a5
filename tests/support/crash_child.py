"""Child process for crash tests: runs one table and SIGKILLs its whole process group (with the JVM) at a point.

Usage: python -m tests.support.crash_child HOME CATALOG TABLE BATCH POINT [PACKAGE ...]

The table comes from the crash registry, or from the dataset packages given (`pipelines.authoring.load`).

BATCH counts micro-batches from the first one this run plans (0 = the first). POINT is where the kill happens:
  before     before the batch writes any table
  between    after the batch's first table commit (it writes more than one table); between-N after its N-th
             (a staged write and its publication are commits each: bronze stages, records file health, publishes)
  after      after the batch's last table commit, before Spark commits the batch to the checkpoint
  committed  after the run, with every batch committed to the checkpoint
  emit       after the batch is committed to the checkpoint, before Spark plans the next one (for a batch that
             moves the watermark: the no-data batch that emits what it closes); the child is killed when that
             next batch starts and its plan (`offsets/<n+1>`) is removed first, leaving the state of a kill
             between the two
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import signal
import sys
from pathlib import Path

from infra.settings import Settings
from infra.spark import get_spark
from pipelines.authoring.load import load_registry
from pipelines.io.checkpoints import last_planned_batch
from pipelines.io.formats import table_format
from pipelines.run import runner
from pipelines.sources import stream_query
from tests.support.crash_registry import crash_registry
from tests.support.killed_child import run_killed_child

POINTS = ("before", "between", "after", "committed", "emit")
_state = {"in_batch": False, "commits": 0, "kill_after_commits": 1}


def _kill() -> None:
    os.killpg(os.getpgid(0), signal.SIGKILL)


def _counting(commit):
    """Wrap a table-committing call: count it, and kill after the first commit of the target batch if asked."""

    def wrapper(*args, **kwargs):
        result = commit(*args, **kwargs)
        if _state["in_batch"]:
            _state["commits"] += 1
            if _state.get("point") == "between" and _state["commits"] == _state["kill_after_commits"]:
                _kill()
        return result

    return wrapper


def kill_in_child(settings: Settings, target: str, batch: int, point: str, packages: tuple[str, ...] = ()) -> None:
    """Run `target` (of the crash registry, or of the dataset `packages`) in a child process that must be SIGKILLed
    at (batch, point); fail the test if it is not."""
    env = {
        "TRIBUTARY_TABLE_FORMAT": settings.table_format,
        **({"TRIBUTARY_WAREHOUSE": settings.warehouse_url} if settings.warehouse_url else {}),
        **(settings.object_store.environment() if settings.warehouse_url else {}),
    }
    if packages:  # importable in the child from where this process imports them
        roots = {str(Path(importlib.util.find_spec(p).origin).parent.parent) for p in packages}  # type: ignore[union-attr,arg-type]
        env["PYTHONPATH"] = os.pathsep.join([*sorted(roots), os.environ.get("PYTHONPATH", "")])
    arguments = (str(settings.home), settings.catalog_name, target, str(batch), point, *packages)
    run_killed_child(settings, "tests.support.crash_child", *arguments, env=env)


def main() -> None:
    home, catalog, target, relative_batch, point = sys.argv[1:6]
    packages = sys.argv[6:]
    point, _, commits = point.partition("-")
    assert point in POINTS, point
    _state["kill_after_commits"] = int(commits or 1)
    given = Settings.from_env(home=home)  # a warehouse in a bucket comes from TRIBUTARY_WAREHOUSE
    settings = dataclasses.replace(given.with_home(Path(home)), catalog_name=catalog, warehouse_url=given.warehouse_url)
    spec = (load_registry(packages) if packages else crash_registry()).get(target)
    planned = last_planned_batch(settings.checkpoint_for(target))
    kill_batch = (planned + 1 if planned is not None else 0) + int(relative_batch)
    _state["point"] = point

    adapter = type(table_format(settings))
    # Every table commit of a batch goes through its format: a staged write and its publication count each.
    for method in ("append", "append_rows", "stage_append", "publish", "merge", "overwrite"):
        setattr(adapter, method, _counting(getattr(adapter, method)))
    write = stream_query.write_micro_batch

    def killing_write(ctx, df, kind, spec, headers=None) -> None:
        if point == "emit" and ctx.batch_id == kill_batch + 1:
            (settings.checkpoint_for(target) / "offsets" / str(ctx.batch_id)).unlink()
            _kill()
        if ctx.batch_id != kill_batch:
            write(ctx, df, kind, spec, headers)
            return
        if point == "before":
            _kill()
        _state.update(in_batch=True, commits=0)
        write(ctx, df, kind, spec, headers)
        _state["in_batch"] = False
        if point == "after":
            _kill()

    stream_query.write_micro_batch = killing_write
    runner.run_table(get_spark(settings), settings, spec)
    if point == "committed":
        _kill()
    sys.exit(3)  # reaching here means the kill point was never hit


if __name__ == "__main__":
    main()
