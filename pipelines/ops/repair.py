"""Repairs that cascade: reprocess a table's days, then bring every table downstream in line for the same days.

A reprocess commits an overwrite, which downstream streams skip (`TableFormat.read_stream`). The tables below it
that recompute by day (a day-partitioned `RecomputeMergeSink`, such as a gold aggregate) are therefore backfilled
for the same days in the same call: rows gone upstream are gone from them too, and other days stay as they are.
A downstream table that streams (or reads a table that could not be carried) cannot take days back: it is named in
the report with the fix, a full refresh.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from pyspark.sql import SparkSession

from infra.settings import Settings
from pipelines.ops.backfill import backfill_days, backfillable_day_column
from pipelines.ops.reprocess import reprocess
from pipelines.spec.registry import Registry
from pipelines.write.ranges import RangeReport


@dataclass
class RepairReport:
    """What a cascading reprocess changed: the table's report, each downstream backfill, and what it left alone."""

    reports: list[RangeReport] = field(default_factory=list)
    not_carried: dict[str, str] = field(default_factory=dict)

    def lines(self) -> list[str]:
        """One line per table: days replaced and rows before → after, or why a table was not carried."""
        out = [
            f"{r.table}: {r.operation} {r.start}..{r.end}, {r.rows_before} → {r.rows_after} rows in {r.seconds:.1f} s"
            for r in self.reports
        ]
        out += [f"{table}: not carried: {why}" for table, why in self.not_carried.items()]
        return out


def reprocess_downstream(
    spark: SparkSession, settings: Settings, registry: Registry, table: str, start: date, end: date
) -> RepairReport:
    """Reprocess the days start..end of `table`, then backfill the same days of every day-partitioned recompute
    table downstream (upstream first); name each downstream table that cannot take days back, with the fix."""
    repair = RepairReport([reprocess(spark, settings, registry, table, start, end)])
    carried = {registry.get(table).name}
    for spec in registry.downstream_closure([table]):
        if spec.name in carried:
            continue
        blocked = [up for up in spec.upstreams if up not in carried and up in repair.not_carried]
        if blocked:
            repair.not_carried[spec.name] = f"it reads {blocked[0]}, which was not carried; full-refresh {table}"
        elif backfillable_day_column(spec) is None:
            repair.not_carried[spec.name] = (
                f"it streams from {', '.join(spec.upstreams)} and skips the rewrite of days; full-refresh {table} "
                f"(tributary refresh {table} --confirm {table}) to rebuild it"
            )
        else:
            repair.reports.append(backfill_days(spark, settings, spec, start, end))
            carried.add(spec.name)
    return repair
