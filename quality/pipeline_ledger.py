"""A pipeline reconciliation's numbers read from commit metadata: what each silver batch recorded with its rows.

A validating sink records in each commit the rows of its batch that commit accounts for
(`pipelines.write.validate.ROWS_READ_PROPERTY`): on silver's commit the batch's valid rows (those it added plus
the duplicates it dropped), on the quarantine's commit its invalid rows. Each number is in the same commit as
the rows, so a batch replayed after a kill, which commits nothing again, is never counted twice. When every
commit of bronze (up to silver's position), silver and the quarantine since the last count that passed (or since
their first commits) appended rows or compacted files, and every silver and quarantine commit carries its record,
the reconciliation adds these numbers to that count instead of reading rows: bronze's rows must equal the valid
plus invalid rows the batches read. Anything else (a row deleted or added by hand, a reprocess, history expired
past the last count, a table written by an earlier release) is counted from the rows (`quality.pipeline_counts`),
as is every check asked to be deep.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.settings import Settings
from pipelines.io.formats import table_format
from pipelines.write.validate import ROWS_READ_PROPERTY
from quality.pipeline_counts import Counts, Tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ADDED = "added-records"


def ledger_counts(spark: SparkSession, settings: Settings, t: Tables, before: Counts | None = None) -> Counts | None:
    """The counts the three tables' commits record, added to `before` (the last count that passed, of the same
    tables) for the commits since it, or from the tables' first commits; None when some commit does not record
    them or did anything but append (`TableFormat.appended_summaries`) in both ranges. Starting from the last
    count keeps the check cheap after old snapshots are expired."""
    starts = [before] if before is not None and before.tables_id == t.tables_id else []
    for start in [*starts, None]:
        counts = _counts_since(spark, settings, t, start)
        if counts is not None:
            return counts
    return None


def _counts_since(spark: SparkSession, settings: Settings, t: Tables, start: Counts | None) -> Counts | None:
    fmt = table_format(settings)
    since = (start.bronze_snapshot, start.silver_snapshot, start.quarantine_snapshot) if start else (None,) * 3
    bronze = fmt.appended_summaries(spark, t.bronze, since[0], t.bronze_snapshot)
    silver = fmt.appended_summaries(spark, t.silver.name, since[1], t.silver_snapshot)
    quarantine = fmt.appended_summaries(spark, t.sink.quarantine_table, since[2], t.quarantine_snapshot)
    if bronze is None or silver is None or quarantine is None:
        return None
    if any(ROWS_READ_PROPERTY not in summary for summary in silver + quarantine):
        return None

    def total(summaries: list[dict], key: str) -> int:
        return sum(int(summary.get(key) or 0) for summary in summaries)

    base = start or Counts(None, None, None, 0, 0, 0, 0, 0, 0, 0)
    added, quarantined = total(silver, ADDED), total(quarantine, ADDED)
    return Counts(
        t.bronze_snapshot,
        t.silver_snapshot,
        t.quarantine_snapshot,
        rows=base.rows + total(bronze, ADDED),
        valid=base.valid + total(silver, ROWS_READ_PROPERTY),
        distinct_valid=base.distinct_valid + added,
        distinct_invalid=base.distinct_invalid + quarantined,
        silver_rows=base.silver_rows + added,
        silver_keys=base.silver_keys + added,
        quarantined=base.quarantined + quarantined,
        tables_id=t.tables_id,
        invalid=base.rejected + total(quarantine, ROWS_READ_PROPERTY),
    )
