"""What the pipelines need from a table format (create, append idempotently, stage, merge, read, stream, describe),
and the types the formats share. `pipelines.io.formats.table_format` picks the adapter."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Protocol

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.merge import MergeIntoWriter
from pyspark.sql.types import StructType

from infra.errors import ConfigError
from infra.sql.table_metadata import Snapshot
from pipelines.io.checkpoints import ConsumerPosition
from pipelines.spec.tables import OutputTable


@dataclass(frozen=True)
class Staged:
    """An append written but not yet published to the main branch (readers and streams do not see it)."""

    snapshot_id: int
    parent_id: int | None
    rows: int
    # Delta: the staged data files and the batch they belong to (Iceberg keeps all of it in the staged snapshot).
    files: tuple[str, ...] = ()
    writer: str = ""
    batch_id: int = -1


@dataclass(frozen=True)
class TableStats:
    """What a table looks like now: numbers Dagster records and plots."""

    snapshot_id: int | None
    rows: int
    data_files: int
    bytes: int


# The column of a change feed row (`TableFormat.change_feed`) saying whether it is a row a commit removed (`old`)
# or added (`new`).
CHANGE_IMAGE = "_tributary_image"


class TableFormat(Protocol):
    """Operations the pipelines need from a table format."""

    def qualified(self, name: str) -> str:
        """The name Spark SQL resolves (catalog-qualified)."""
        ...

    def ensure_table(self, spark: SparkSession, table: OutputTable, allow_added: bool = False) -> None:
        """Create the namespace and table if missing; add declared columns it lacks; fail on other differences.

        `allow_added`: the table may hold columns its spec does not declare (added by schema evolution).
        (`pipelines.io.formats.TableFormats.ensure_table` also takes the format a missing table is created in.)
        """
        ...

    def columns(self, spark: SparkSession, name: str) -> list[str]:
        """The table's column names now."""
        ...

    def add_string_columns(self, spark: SparkSession, name: str, columns: list[str]) -> None:
        """Add nullable string columns (schema evolution of landed data)."""
        ...

    def committed_batches(self, spark: SparkSession, name: str, writer: str, since: int = 0) -> set[int]:
        """Batch ids of at least `since` that `writer` has already committed to `name`."""
        ...

    def append(
        self, df: DataFrame, name: str, writer: str, batch_id: int, properties: Mapping[str, str] | None = None
    ) -> int:
        """Append `df` as one commit tagged with the writer and batch id (and `properties`, kept with the commit:
        a Kafka source's end offsets); return the rows added."""
        ...

    def append_rows(
        self,
        name: str,
        rows: Sequence[Mapping[str, object]],
        writer: str,
        batch_id: int,
        properties: Mapping[str, str] | None = None,
    ) -> int:
        """Append a few rows the driver holds (per-file health, a batch's few quarantined rows), tagged like `append`
        (with `properties`), in one commit written from Python (no Spark job: a Spark append of three rows costs half
        a second); return the rows added. Timestamps must be timezone-aware (`pipelines.write.driver_rows`)."""
        ...

    def read_rows(
        self, name: str, columns: Sequence[str], among: tuple[str, Sequence[object]] | None = None
    ) -> list[dict[str, object]]:
        """The current rows of a small table (per-file health) as dicts of `columns`, read from Python: the
        counterpart of `append_rows` (a Spark job over a table of a few files costs a fifth of a second). With
        `among` (a column, values): only the rows whose column holds one of the values (none NULL, at least one)."""
        ...

    def latest_properties(self, spark: SparkSession | None, name: str, key: str) -> dict[str, str] | None:
        """The properties of the newest commit on the table's current line that carries `key` (None when none
        does): what `append` kept with it, read in one walk."""
        ...

    def stage_append(self, df: DataFrame, name: str, writer: str, batch_id: int) -> Staged:
        """Write `df` as an append tagged like `append`, but unpublished: not a committed batch until `publish`."""
        ...

    def read_staged(self, spark: SparkSession, name: str, staged: Staged) -> DataFrame:
        """The rows of a staged append (only those)."""
        ...

    def publish(self, spark: SparkSession, name: str, staged: Staged) -> None:
        """Make a staged append part of the table (one atomic commit); its batch is then committed."""
        ...

    def exists(self, spark: SparkSession | None, name: str) -> bool:
        """Whether the table exists (`spark` None: without starting a session where the format can)."""
        ...

    def current_snapshot(self, spark: SparkSession | None, name: str) -> Snapshot | None:
        """The table's current snapshot (id and summary); None for a table never written."""
        ...

    def last_data_snapshot(self, spark: SparkSession | None, name: str) -> Snapshot | None:
        """The newest snapshot that changed the table's rows (compactions skipped); None for a table never written."""
        ...

    def stats(self, spark: SparkSession | None, name: str) -> TableStats:
        """Current snapshot, row count, data files and bytes."""
        ...

    def read(self, spark: SparkSession, name: str, snapshot_id: int | None = None) -> DataFrame:
        """The table's rows now, or as of one of its snapshots (Delta: versions)."""
        ...

    def read_stream(self, spark: SparkSession, name: str, checkpoint: Path | None = None) -> DataFrame:
        """A streaming DataFrame over the table's appends (overwrite, delete and compaction commits are skipped), for
        the stream whose checkpoint is `checkpoint` (where it starts may depend on what it has committed)."""
        ...

    def appended_rows(self, spark: SparkSession, name: str, since: int | None, until: int) -> DataFrame | None:
        """The rows the snapshots after `since` (None: the table's start) up to `until` appended, when every one of
        them only appended rows or rewrote files (compaction); None when one changed rows otherwise (a reprocess,
        a MERGE) or `since` is not an ancestor of `until`."""
        ...

    def appended_summaries(self, spark: SparkSession, name: str, since: int | None, until: int) -> list[dict] | None:
        """The properties (snapshot summary, commit info, with `added-records`) of each commit after `since` (None:
        the table's first) up to `until` that appended rows, oldest first; None under the conditions under which
        `appended_rows` is None."""
        ...

    def table_id(self, spark: SparkSession | None, name: str) -> str:
        """The table's identity: a table dropped and created again under the same name has another, so that
        snapshot ids (Delta: versions) from before are not taken for its own."""
        ...

    def consumer_caught_up(self, spark: SparkSession | None, name: str, checkpoint: Path) -> bool:
        """Whether the stream at `checkpoint` has read every append of `name` and owes no batch."""
        ...

    def consumer_position(self, name: str, consumer: str, checkpoint: Path) -> ConsumerPosition:
        """The snapshot of `name` up to which the stream of `consumer` at `checkpoint` has read every append."""
        ...

    def changed_days(self, spark: SparkSession, name: str, column: str, since: datetime) -> list[date]:
        """The days (of the date column `column`) of rows written to the table at or after `since`."""
        ...

    def merge(self, df: DataFrame, name: str, merge: Merge, properties: Mapping[str, str] | None = None) -> None:
        """MERGE `df` (alias `s`) into the table (alias `t`) in one commit, with `properties` in it."""
        ...

    def replace_days(self, df: DataFrame, name: str, days: DayRange, operation: str) -> int | None:
        """Delete the rows on `days` and add `df`'s in one commit tagged `tributary.operation`; return its snapshot
        id. Streams skip the commit (an overwrite)."""
        ...

    def replay_problem(self, spark: SparkSession, name: str) -> str | None:
        """Why a new stream could not replay every append of `name` from the start (None when it can)."""
        ...

    def drop(self, spark: SparkSession, name: str) -> None:
        """Delete the table and its files (nothing when it does not exist)."""
        ...

    def overwrite(self, df: DataFrame, name: str, properties: Mapping[str, str] | None = None) -> None:
        """Replace every row of the table with `df` in one commit, with `properties` in it."""
        ...

    def change_feed(self, spark: SparkSession, name: str, since: int, until: int) -> DataFrame:
        """The rows the commits after `since` up to `until` (snapshot ids; Delta: versions) removed and added,
        each with `_tributary_image` `old` or `new` (Iceberg's changelog, Delta's change data feed); a failure to
        read it (an expired snapshot, a version that recorded no changes) may surface only when it is read
        (`pipelines.io.table_changes`)."""
        ...


@dataclass(frozen=True)
class Merge:
    """A MERGE of source rows (alias `s`) into a table (alias `t`), declared once for every table format.

    Conditions are SQL that Spark and delta-rs (DataFusion) both read: `t.`/`s.` columns, comparisons, `AND`, `OR`,
    `NOT`, `IS NOT DISTINCT FROM`. Clauses apply in this order: delete, update, insert.
    """

    keys: tuple[str, ...]
    null_safe_keys: bool = False  # keys match when both are NULL
    match_when: str | None = None  # a further condition of the match
    delete_when: str | None = None  # WHEN MATCHED AND <condition> THEN DELETE
    update: bool = True
    update_when: str | None = None  # WHEN MATCHED [AND <condition>] THEN UPDATE
    insert_when: str | None = None  # WHEN NOT MATCHED [AND <condition>] THEN INSERT
    columns: tuple[str, ...] = ()  # the target columns set and inserted (empty: all of them, from `s`)
    # (column, SQL over `t.` and `s.`) assignments on a match instead of the source's values (`columns`: inserts)
    sets: tuple[tuple[str, str], ...] = ()

    @property
    def on(self) -> str:
        """The match condition."""
        same = "IS NOT DISTINCT FROM" if self.null_safe_keys else "="
        keys = [f"(t.{k} {same} s.{k})" for k in self.keys]  # parenthesized: DataFusion binds AND tighter
        return " AND ".join([*([f"({self.match_when})"] if self.match_when else []), *keys])

    def run(self, df: DataFrame, target: str, finish: Callable[[MergeIntoWriter], None] | None = None) -> None:
        """`MERGE INTO target` (a name Spark SQL resolves) from `df`, by Spark's DataFrame merge; `finish` runs the
        built MERGE (default: `merge()`).

        Not a SQL MERGE over a temp view of `df`: Spark 4.1 keeps a temp view's tables as references that its
        MERGE planning leaves unresolved when the source reads the target ("No plan for TableReference",
        SPARK-57539, fixed in Spark 4.2 by SPARK-54873). The target's columns are qualified by its name."""
        cond = functools.partial(_target_qualified, target)
        writer = df.alias("s").mergeInto(target, F.expr(cond(self.on)))
        if self.delete_when:
            writer = writer.whenMatched(F.expr(cond(self.delete_when))).delete()
        if self.update:
            matched = writer.whenMatched(F.expr(cond(self.update_when)) if self.update_when else None)
            sets = {c: F.col(f"s.{c}") for c in self.columns} | {c: F.expr(cond(e)) for c, e in self.sets}
            writer = matched.update(sets) if sets else matched.updateAll()
        inserting = writer.whenNotMatched(F.expr(cond(self.insert_when)) if self.insert_when else None)
        values = {c: F.col(f"s.{c}") for c in self.columns}
        built = inserting.insert(values) if values else inserting.insertAll()
        if finish is None:
            built.merge()
        else:
            finish(built)

    def inserted(self, df: DataFrame) -> DataFrame:
        """The rows this MERGE inserts into a table that holds none: every source row its insert clause takes, as
        the columns it sets (all of them when `columns` is empty)."""
        rows = df.alias("s")
        if self.insert_when:
            rows = rows.filter(F.expr(self.insert_when))
        return rows.select(*self.columns) if self.columns else rows.select(*df.columns)


@dataclass(frozen=True)
class DayRange:
    """The rows of a table whose date or timestamp `column` falls on the days start..end (inclusive; UTC days)."""

    column: str
    start: date
    end: date
    timestamp: bool  # the column is a timestamp (else a date)

    def condition(self) -> Column:
        """As a Spark column."""
        if not self.timestamp:
            return F.col(self.column).between(F.lit(self.start), F.lit(self.end))
        lo, hi = self._bounds()
        return (F.col(self.column) >= F.lit(lo)) & (F.col(self.column) < F.lit(hi))

    def predicate(self) -> str:
        """As SQL that delta-rs (DataFusion) reads: ISO literals, which it casts to the column's type."""
        if not self.timestamp:
            return f"{self.column} >= '{self.start.isoformat()}' AND {self.column} <= '{self.end.isoformat()}'"
        lo, hi = self._bounds()
        return f"{self.column} >= '{lo.isoformat()}Z' AND {self.column} < '{hi.isoformat()}Z'"

    def _bounds(self) -> tuple[datetime, datetime]:
        return datetime.combine(self.start, datetime.min.time()), datetime.combine(
            self.end + timedelta(days=1), datetime.min.time()
        )


def _target_qualified(target: str, condition: str) -> str:
    """`condition` with the target's `t.` columns qualified by the target's name (`s.` is the source's alias)."""
    return re.sub(r"(?<![\w`.])t\.", lambda _: f"{target}.", condition)


def check_schema(name: str, existing: StructType, declared: StructType, allow_added: bool = False) -> None:
    """Declared columns the table lacks are added by `ensure_table`; changed types and (unless allowed) columns
    the spec does not declare are errors."""
    have = {f.name: f.dataType.simpleString() for f in existing.fields}
    want = {f.name: f.dataType.simpleString() for f in declared.fields}
    extra = [] if allow_added else sorted(set(have) - set(want))
    changed = sorted(k for k in set(have) & set(want) if have[k] != want[k])
    if extra or changed:
        raise ConfigError(
            f"table {name!r} exists with a different schema than its spec declares "
            f"(unexpected columns {extra}, changed types {changed}); "
            "migrate the table or run a full refresh"
        )
