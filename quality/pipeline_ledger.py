"""A pipeline reconciliation's numbers read from commit metadata: what each silver batch recorded with its rows.

A validating sink records in each commit the rows of its batch that commit accounts for
(`pipelines.write.validate.ROWS_READ_PROPERTY`): on silver's commit the batch's valid rows (those it added plus
the duplicates it dropped), on the quarantine's commit its invalid rows. Each number is in the same commit as
the rows, so a batch replayed after a kill, which commits nothing again, is never counted twice. When every
commit of bronze (up to silver's position), silver and the quarantine appended rows or compacted files, and
every silver and quarantine commit carries its record, the reconciliation reads these numbers instead of the
rows: bronze's rows must equal the valid plus invalid rows the batches read. Anything else (a row deleted or
added by hand, a reprocess, expired history, a table written by an earlier release) is counted from the rows
(`quality.pipeline_counts`), as is every check asked to be deep.
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


def ledger_counts(spark: SparkSession, settings: Settings, t: Tables) -> Counts | None:
    """The counts the three tables' commits record, or None when some commit does not record them or did
    anything but append (`TableFormat.appended_summaries`)."""
    fmt = table_format(settings)
    bronze = fmt.appended_summaries(spark, t.bronze, None, t.bronze_snapshot)
    silver = fmt.appended_summaries(spark, t.silver.name, None, t.silver_snapshot)
    quarantine = fmt.appended_summaries(spark, t.sink.quarantine_table, None, t.quarantine_snapshot)
    if bronze is None or silver is None or quarantine is None:
        return None
    if any(ROWS_READ_PROPERTY not in summary for summary in silver + quarantine):
        return None

    def total(summaries: list[dict], key: str) -> int:
        return sum(int(summary.get(key) or 0) for summary in summaries)

    added, quarantined = total(silver, ADDED), total(quarantine, ADDED)
    return Counts(
        t.bronze_snapshot,
        t.silver_snapshot,
        t.quarantine_snapshot,
        rows=total(bronze, ADDED),
        valid=total(silver, ROWS_READ_PROPERTY),
        distinct_valid=added,
        distinct_invalid=quarantined,
        silver_rows=added,
        silver_keys=added,
        quarantined=quarantined,
        tables_id=t.tables_id,
        invalid=total(quarantine, ROWS_READ_PROPERTY),
    )
