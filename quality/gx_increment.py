"""Validate only what changed: a table's row expectations on the rows appended since they last passed.

A row expectation that passed with no row allowed to fail (not null, in set, between with `mostly` 1, or unique)
passed on every row of the snapshot it was checked at. When every snapshot of the table since then only appended
rows or rewrote files (a compaction), the rows that expectation has not seen are exactly the appended ones: it
passes on the table if it passes on them (and, for `unique`, none of their keys was stored before). Anything
else (a failure, a changed suite, a table created again, a delete, an overwrite) is validated on the whole table.
Table-level expectations (row counts, freshness) and those that failed before always read the whole table.

Cheaper still: a validating writer records in each commit the row expectations every row it wrote meets
(`pipelines.spec.held`). When every commit since that snapshot (or since the table's first, with no usable earlier
result) appended rows and records an expectation as held, it holds on the table without reading a row
(`held_by_commits`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from infra.settings import Settings
from pipelines.io.formats import table_format
from pipelines.spec.expectations import ROW_KINDS, Expectation
from pipelines.spec.held import fingerprint, held_in
from pipelines.spec.tables import TableSpec
from quality.results import latest_result

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TABLE_ID_STATE = "table_id"


@dataclass(frozen=True)
class Increment:
    """The rows a table appended after snapshot `since` (where its row expectations named `passed` last passed)
    up to snapshot `until`."""

    since: int
    until: int
    rows: DataFrame
    appended: int
    passed: frozenset[str]

    def covers(self, exp: Expectation) -> bool:
        """Whether `exp` can be validated on the appended rows alone."""
        return exp.kind in ROW_KINDS and exp.mostly == 1.0 and exp.label in self.passed

    def note(self, validated: int) -> str:
        """What was validated where, for the result's notes."""
        return (
            f"{validated} row expectation(s) validated on the {self.appended} row(s) appended since snapshot "
            f"{self.since}, where they last passed; the others on the whole table"
        )


def increment_since_passed(
    spark: SparkSession,
    settings: Settings,
    spec: TableSpec,
    checks: list[str],
    inputs: dict[str, str],
    snapshot: int | None,
    rows: int,
    table_id: str,
) -> Increment | None:
    """The appended rows since the snapshot the latest results of `checks` validated, when those results read the
    same suite of the same table (`table_id`, `TableFormat.table_id`) and everything since only appended; else
    None."""
    found = [latest_result(settings, spec.name, check) for check in checks]
    previous = [r for r in found if r is not None and r.inputs]
    if snapshot is None or len(previous) != len(checks):
        return None
    fmt = table_format(settings)
    facts = {(r.snapshot_id, r.rows_checked, r.inputs.get("suite"), r.state.get(TABLE_ID_STATE)) for r in previous}
    if len(facts) != 1:  # the checks of one validation read one snapshot
        return None
    ((since, rows_before, suite, validated_id),) = facts
    if since is None or rows_before is None or suite != inputs.get("suite") or int(since) == snapshot:
        return None
    if validated_id != table_id:  # created again: its snapshots are another table's
        return None
    appended = fmt.appended_rows(spark, spec.name, int(since), snapshot)
    if appended is None:
        return None
    passed = frozenset(o.name for r in previous for o in r.outcomes if o.success)
    return Increment(int(since), snapshot, appended, rows - rows_before, passed)


def keys_stored_before(spark: SparkSession, settings: Settings, spec: TableSpec, increment: Increment) -> list[str]:
    """The `unique` expectations covered by `increment` some of whose appended keys the table held before,
    compared null-safely (a key whose columns are all missing is not a key).

    The appended keys are unique among themselves (GX has just checked that), so the table at `until` holds each
    of them once unless it held it before: the table's rows with these keys are grouped by key, which needs no
    older snapshot's files (a vacuum may have removed them)."""
    fmt, clashing = table_format(settings), []
    for exp in spec.expectations:
        if exp.kind != "unique" or not increment.covers(exp):
            continue
        columns = list(exp.columns)
        present = reduce(lambda a, b: a | b, [F.col(c).isNotNull() for c in columns])
        new = increment.rows.select(*columns).filter(present).alias("new")
        table = fmt.read(spark, spec.name, increment.until).select(*columns).alias("table")
        same = reduce(lambda a, b: a & b, [F.col(f"table.{c}").eqNullSafe(F.col(f"new.{c}")) for c in columns])
        held = table.join(new, same, "left_semi").groupBy(*columns).count()
        if held.filter("count > 1").limit(1).collect():
            clashing.append(exp.label)
    return clashing


@dataclass(frozen=True)
class Held:
    """The expectations every commit after snapshot `since` (None: the table's first) up to `until` records as
    held on the rows it appended (`commits` of them)."""

    since: int | None
    commits: int
    fingerprints: frozenset[str]

    def proves(self, exp: Expectation, increment: Increment | None) -> bool:
        """Whether `exp` holds on the table: held by every commit since the snapshot the proof starts from, and
        (starting from an earlier result) passed there."""
        return fingerprint(exp) in self.fingerprints and (increment is None or increment.covers(exp))

    def note(self, proven: int) -> str:
        """What was proven where, for the result's notes."""
        since = "the table's first commit" if self.since is None else f"snapshot {self.since}"
        return (
            f"{proven} row expectation(s) held on every row of the {self.commits} commit(s) since {since}, as "
            "counted by their writer in the batch (no row read again)"
        )


def held_by_commits(
    spark: SparkSession, settings: Settings, spec: TableSpec, snapshot: int | None, increment: Increment | None
) -> Held | None:
    """The expectations held by every commit since `increment`'s snapshot (None: since the table's first) up to
    `snapshot`, when all of them appended rows or compacted files; else None."""
    if snapshot is None:
        return None
    since = increment.since if increment is not None else None
    summaries = table_format(settings).appended_summaries(spark, spec.name, since, snapshot)
    if not summaries:
        return None
    held = frozenset.intersection(*(held_in(s) for s in summaries))
    return Held(since, len(summaries), held) if held else None
