"""The main branch's snapshot history of an Iceberg table, read from its metadata on the driver.

Every micro-batch asks whether it was already committed, and every append reads back the rows it added. Asked of
the `snapshots` and `history` metadata tables, each is a Spark job (0.2-0.3 s for a table with 40 snapshots);
walking the current snapshot's ancestry in the loaded table metadata takes 0.03 s and stops as soon as the
answer is known.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.io.format_types import CHANGE_IMAGE

WRITER_PROPERTY = "tributary.writer"
# A commit made by an operation (reprocess, backfill) rather than a streaming batch, and that commit's own id.
OPERATION_PROPERTY = "tributary.operation"
OPERATION_ID_PROPERTY = "tributary.operation-id"
BATCH_PROPERTY = "tributary.batch-id"
# A staged (write-audit-publish) append carries `wap.id` = tributary/<writer>/<batch id>/<attempt>; Iceberg keeps it
# as `published-wap-id` when a cherry-pick has to copy the snapshot (main moved), which drops the custom summary.
WAP_PREFIX = "tributary"
# The columns Iceberg's changelog adds to a table's own.
_CHANGELOG_COLUMNS = ("_change_type", "_change_ordinal", "_commit_snapshot_id")


def load_table(spark: SparkSession, qualified: str) -> Any:
    """The Iceberg Java table `qualified` (catalog.namespace.table), loaded afresh through Spark's catalog."""
    util = spark.sparkContext._jvm.org.apache.iceberg.spark.Spark3Util  # type: ignore[union-attr]
    return util.loadIcebergTable(spark._jsparkSession, qualified)


def _main_ancestry(spark: SparkSession, qualified: str) -> Iterator[dict[str, str | None]]:
    """The summaries of main's current snapshot and its ancestors, newest first (until an expired parent)."""
    table = load_table(spark, qualified)
    snapshot = table.currentSnapshot()
    while snapshot is not None:
        summary = snapshot.summary()
        yield {k: summary.get(k) for k in (WRITER_PROPERTY, BATCH_PROPERTY, "published-wap-id", "added-records")}
        parent = snapshot.parentId()
        snapshot = table.snapshot(parent) if parent is not None else None


def _batch_of(summary: dict[str, str | None], writer: str) -> int | None:
    """The batch id `writer` committed in this snapshot, directly or as a published staged append."""
    if summary[WRITER_PROPERTY] == writer and summary[BATCH_PROPERTY] is not None:
        return int(summary[BATCH_PROPERTY])
    published = summary["published-wap-id"]
    if published and published.startswith(f"{WAP_PREFIX}/{writer}/"):
        return int(published.split("/")[2])
    return None


def committed_batches(spark: SparkSession, qualified: str, writer: str, since: int = 0) -> set[int]:
    """The batch ids of at least `since` that `writer` committed to main.

    A writer (one streaming checkpoint) commits its batches to a table in increasing order, so the walk stops at
    its first batch below `since`. A staged append that was never published is on no branch and never counts.
    """
    found: set[int] = set()
    for summary in _main_ancestry(spark, qualified):
        batch = _batch_of(summary, writer)
        if batch is not None:
            if batch < since:
                break
            found.add(batch)
    return found


def added_rows(spark: SparkSession, qualified: str, writer: str, batch_id: int) -> int:
    """The rows `writer`'s append of `batch_id` added, from its snapshot summary on main (0 if not found)."""
    for summary in _main_ancestry(spark, qualified):
        batch = _batch_of(summary, writer)
        if batch == batch_id:
            return int(summary["added-records"] or 0)
        if batch is not None and batch < batch_id:
            break
    return 0


def enable_staging(spark: SparkSession, qualified: str) -> None:
    """Let the table take staged appends (`write.wap.enabled`), set once in its lifetime."""
    table = load_table(spark, qualified)
    if table.properties().get("write.wap.enabled") != "true":
        table.updateProperties().set("write.wap.enabled", "true").commit()


def staged_snapshot(spark: SparkSession, qualified: str, wap_id: str) -> tuple[int, int | None, int] | None:
    """The snapshot staged with `wap_id` (unique: it ends in a random part) as (snapshot id, parent id, rows
    added); None unless it exists off the main branch. Searched newest first: it was just added."""
    table = load_table(spark, qualified)
    snapshots = table.operations().current().snapshots()
    current = table.currentSnapshot()
    for i in range(snapshots.size() - 1, -1, -1):
        snapshot = snapshots.get(i)
        summary = snapshot.summary()
        if summary.get("wap.id") != wap_id:
            continue
        if current is not None and current.snapshotId() == snapshot.snapshotId():
            return None
        parent, added = snapshot.parentId(), summary.get("added-records")
        return int(snapshot.snapshotId()), None if parent is None else int(parent), int(added or 0)
    return None


def table_uuid(spark: SparkSession, qualified: str) -> str:
    """The table's UUID: a table dropped and created again under the same name has another."""
    return str(load_table(spark, qualified).uuid().toString())


def appended_since(spark: SparkSession, qualified: str, since: int | None, until: int) -> DataFrame | None:
    """The rows the snapshots after `since` (None: the table's start) up to `until` appended, through Iceberg's
    incremental append scan (`start-snapshot-id` exclusive, `end-snapshot-id` inclusive); None unless each of
    them appended rows or only rewrote files (`only_appends_between`)."""
    if not only_appends_between(spark, qualified, since, until):
        return None
    if since is not None and since != until:
        reader = spark.read.format("iceberg").option("start-snapshot-id", str(since))
        return reader.option("end-snapshot-id", str(until)).load(qualified)
    rows = spark.sql(f"SELECT * FROM {qualified} VERSION AS OF {int(until)}")
    return rows if since is None else rows.limit(0)


def only_appends_between(spark: SparkSession, qualified: str, since: int | None, until: int) -> bool:
    """Whether `since` (None: the table's start) is an ancestor of `until` and every snapshot after it up to
    `until` appended rows or rewrote files without changing rows (`replace`: a compaction)."""
    table = load_table(spark, qualified)
    snapshot = table.snapshot(until)
    while snapshot is not None and snapshot.snapshotId() != since:
        if snapshot.operation() not in ("append", "replace"):
            return False
        parent = snapshot.parentId()
        snapshot = table.snapshot(parent) if parent is not None else None
    return snapshot is not None or since is None


def appended_summaries(spark: SparkSession, qualified: str, since: int | None, until: int) -> list[dict] | None:
    """The summaries of the snapshots after `since` (None: from the table's first) up to `until` that appended
    rows, oldest first; None unless each of them appended or only rewrote files (a compaction) and the history
    back to `since` is still known (no expired snapshot in between)."""
    snapshots = {s["snapshot-id"]: s for s in _metadata(spark, qualified).get("snapshots", [])}
    found: list[dict] = []
    snapshot = snapshots.get(until)
    while snapshot is not None and snapshot["snapshot-id"] != since:
        summary = dict(snapshot.get("summary", {}))
        operation = summary.pop("operation", None)
        if operation == "append":
            found.append(summary)
        elif operation != "replace":
            return None
        parent = snapshot.get("parent-snapshot-id")
        if parent is None:
            return found[::-1] if since is None else None
        snapshot = snapshots.get(parent)
    return found[::-1] if snapshot is not None else None


def _metadata(spark: SparkSession, qualified: str) -> dict[str, Any]:
    """The table's current metadata as Iceberg writes it (JSON), in one call: walking many snapshots' summaries
    through the JVM gateway entry by entry took 2.4 s for a table of 160 snapshots."""
    parser = spark.sparkContext._jvm.org.apache.iceberg.TableMetadataParser  # type: ignore[union-attr]
    return json.loads(parser.toJson(load_table(spark, qualified).operations().current()))


def replay_problem(spark: SparkSession, qualified: str) -> str | None:
    """Why a new stream could not replay the table from its first snapshot: a snapshot whose parent was expired, or
    an overwrite or delete (a reprocess) in the history; None when it can."""
    try:
        snaps = spark.sql(f"SELECT snapshot_id, parent_id, operation FROM {qualified}.snapshots").collect()
    except AnalysisException:
        return None  # no table yet: a new stream starts when it appears
    ids = {s.snapshot_id for s in snaps}
    expired = [s for s in snaps if s.parent_id is not None and s.parent_id not in ids]
    if expired:
        return f"its snapshot history before {expired[0].snapshot_id} was expired"
    rewritten = [s for s in snaps if s.operation in ("overwrite", "delete")]
    if rewritten:
        return f"snapshot {rewritten[0].snapshot_id} {rewritten[0].operation} rows in place (a reprocess)"
    return None


def changelog(spark: SparkSession, qualified: str, since: int, until: int) -> DataFrame:
    """Iceberg's changelog (the `changes` metadata table) of the snapshots after `since` up to `until`, each row
    marked as an old or a new image. A copy-on-write commit lists every row of the files it removed and of those it
    added, the rows it left unchanged too; compactions (`replace`) are not listed."""
    feed = (
        spark.read.format("iceberg")
        .option("start-snapshot-id", str(since))
        .option("end-snapshot-id", str(until))
        .load(f"{qualified}.changes")
    )
    added = F.col("_change_type").isin("INSERT", "UPDATE_AFTER")
    data = [c for c in feed.columns if c not in _CHANGELOG_COLUMNS]
    return feed.select(*data, F.when(added, "new").otherwise("old").alias(CHANGE_IMAGE))
