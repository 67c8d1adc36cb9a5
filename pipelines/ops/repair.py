"""Repairs that cascade: reprocess a table's days, then bring every table downstream in line in the same call.

A reprocess commits an overwrite, which downstream streams skip (`TableFormat.read_stream`), so each table below
is repaired here, upstream first, for the days the repair above it touched:

- a table that recomputes by day (a day-partitioned `RecomputeMergeSink`, such as a gold aggregate) is backfilled
  for those days: rows gone upstream are gone from it too, and other days stay as they are;
- a table that re-validates its upstream's rows by day (a silver table) is reprocessed for the days its own day
  column takes in the repaired upstream rows: a bronze table's ingestion days become silver's event days;
- any other table (a streamed window, a table fed by several flows) cannot take days back: it is named in the
  report with the fix, a full refresh, and so is every table below it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from infra.errors import ConfigError
from infra.settings import Settings
from pipelines.io.formats import table_format
from pipelines.ops.backfill import backfill_days, backfillable_day_column
from pipelines.ops.reprocess import reprocess
from pipelines.spec.registry import Registry
from pipelines.spec.tables import TableSpec
from pipelines.write.ranges import RangeReport, day_column, day_range

Days = tuple[date, date]


@dataclass
class RepairReport:
    """What a cascading reprocess changed: each table's report, in order, and the tables it could not carry."""

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
    """Reprocess the days start..end of `table`, then repair every table downstream for the days each repair
    touched (upstream first); name each downstream table that cannot take days back, with the fix."""
    closure = registry.downstream_closure([table])
    name = registry.get(table).name
    # A re-validating reader redoes the days of its upstream's rows before the repair (rows that vanish) and after.
    before = _reader_days(spark, settings, registry, closure, name, (start, end))
    repair = RepairReport([reprocess(spark, settings, registry, table, start, end)])
    touched: dict[str, Days | None] = {name: (start, end)}
    for spec in closure:
        if spec.name in touched:
            continue
        blocked = next((up for up in spec.upstreams if up in repair.not_carried), None)
        if blocked:
            repair.not_carried[spec.name] = f"it reads {blocked}, which was not carried; full-refresh {table}"
            continue
        spans = [touched[up] for up in spec.upstreams if up in touched]
        if backfillable_day_column(spec) is not None:
            days = _union([*spans])
        elif spec.name in before:
            after = _reader_days(spark, settings, registry, [spec], spec.upstream or "", touched[spec.upstream or ""])
            days = _union([before[spec.name], after.get(spec.name)])
        else:
            repair.not_carried[spec.name] = (
                f"it streams from {', '.join(spec.upstreams)} and skips the rewrite of days; full-refresh {table} "
                f"(tributary refresh {table} --confirm {table}) to rebuild it"
            )
            continue
        touched[spec.name] = days
        if days is None:  # the repaired rows hold no day of this table: nothing to redo
            continue
        if backfillable_day_column(spec) is not None:
            repair.reports.append(backfill_days(spark, settings, spec, *days))
        else:
            before.update(_reader_days(spark, settings, registry, closure, spec.name, days))
            repair.reports.append(reprocess(spark, settings, registry, spec.name, *days))
    return repair


def _union(spans: list[Days | None]) -> Days | None:
    known = [s for s in spans if s is not None]
    return (min(s for s, _ in known), max(e for _, e in known)) if known else None


def _reader_days(
    spark: SparkSession, settings: Settings, registry: Registry, specs: list[TableSpec], parent: str, span: Days | None
) -> dict[str, Days | None]:
    """For each table of `specs` that re-validates `parent`'s rows by day: the range of its own days among the
    parent's rows on the days `span` (None when there are none). Tables that cannot redo days are left out."""
    found: dict[str, Days | None] = {}
    upstream = registry.get(parent).output if parent else None
    for spec in specs:
        if upstream is None or spec.upstream != parent or spec.sink.reprocess_by != "revalidate":
            continue
        if len(spec.all_flows()) > 1:
            continue
        try:
            column = day_column(spec.output)
            repaired = day_range(upstream, day_column(upstream), *span) if span else None
        except ConfigError:
            continue
        if column not in upstream.schema.names:
            continue
        if repaired is None:
            found[spec.name] = None
            continue
        rows = table_format(settings).read(spark, parent).filter(repaired.condition())
        first, last = rows.select(F.min(F.to_date(column)), F.max(F.to_date(column))).first() or (None, None)
        found[spec.name] = (first, last) if first is not None else None
    return found
