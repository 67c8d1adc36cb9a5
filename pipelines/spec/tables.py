"""What a table is: one `TableSpec` per table (its source, output, write strategy and checks), and its parts."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from infra.errors import ConfigError
from infra.identifiers import COLUMN_PATTERN
from pipelines.spec.sources import Source, Watermark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from pipelines.spec.expectations import Expectation
    from pipelines.spec.strategy import Sink

Layer = Literal["bronze", "silver", "gold"]
OutputMode = Literal["append", "update", "complete"]
FILES_SUFFIX = "_files"
LAYERS: tuple[Layer, ...] = ("bronze", "silver", "gold")
_SORT_ITEM = re.compile(rf"^{COLUMN_PATTERN}( (asc|desc))?( nulls (first|last))?$", re.IGNORECASE)


@dataclass(frozen=True)
class OutputTable:
    """A table a spec's sink writes: its name, schema and Iceberg partition transforms.

    `declared` is the schema given by the author. `infer`, when set, derives the schema from the table's
    transform (with Spark, on first use; `pipelines.authoring.schemas`) and checks it against `declared`.
    `grain_from` names the upstream table whose distinct days, when the table is created, may make a default
    `days(<time>)` partitioning `months` or `years` (`pipelines.io.partition_grain`).
    """

    name: str
    declared: StructType | None = None
    partition_by: tuple[str, ...] = ()
    grain_from: str | None = None
    infer: Callable[[], StructType] | None = field(default=None, compare=False, repr=False)
    _resolved: list[StructType] = field(default_factory=list, init=False, compare=False, repr=False)

    @property
    def schema(self) -> StructType:
        """The table's schema: inferred (and checked against the declared one) on first use, or as declared."""
        if self.infer is None:
            if self.declared is None:
                raise ConfigError(f"table {self.name!r} declares no schema and has nothing to infer it from")
            return self.declared
        if not self._resolved:
            self._resolved.append(self.infer())
        return self._resolved[0]


@dataclass(frozen=True)
class MaintenancePolicy:
    """How a table is kept healthy (compaction and retention); see the maintenance assets."""

    target_file_size_mb: int = 128
    snapshot_retention_days: int = 7
    min_snapshots_to_keep: int = 5
    orphan_retention_days: int = 3
    # Compaction: rewrite a partition's small files only when it holds at least this many (Iceberg min-input-files).
    min_input_files: int = 5
    # Compaction sensor: a data file under `small_file_mb` is small; compaction is requested when more than
    # `max_small_files` compactable small files exist, or the average data file is under `min_avg_file_mb`.
    small_file_mb: int = 32
    max_small_files: int = 20
    min_avg_file_mb: int = 8
    # Optional sort order for compaction, e.g. ("event_time", "user_id DESC NULLS LAST"); empty = bin-pack.
    sort_order: tuple[str, ...] = ()

    def validate(self, table: str) -> None:
        """Raise ConfigError naming `table` and the field when a setting is unsafe or meaningless."""
        minimums = {
            "target_file_size_mb": (1, ""),
            "snapshot_retention_days": (1, "; time travel and lagging streams need recent snapshots"),
            "min_snapshots_to_keep": (1, ""),
            "orphan_retention_days": (1, "; Iceberg refuses to remove orphan files younger than 24 hours"),
            "min_input_files": (2, ""),
            "small_file_mb": (1, ""),
            "max_small_files": (1, ""),
            "min_avg_file_mb": (1, ""),
        }
        for name, (low, why) in minimums.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(
                    f"table {table!r}: maintenance.{name}={value!r} is invalid; it must be an integer >= {low}"
                    f"{why} (default {getattr(MaintenancePolicy, name)})"
                )
        for item in self.sort_order:
            if not isinstance(item, str) or not _SORT_ITEM.match(item):
                raise ConfigError(
                    f"table {table!r}: maintenance.sort_order item {item!r} is not 'column [ASC|DESC] "
                    "[NULLS FIRST|LAST]' (e.g. 'event_time DESC NULLS LAST')"
                )


# The flow of a table's declared source; further flows are named by their declarations.
MAIN_FLOW = "main"


@dataclass(frozen=True)
class Flow:
    """One stream of rows into a table, with its own checkpoint and numbers. A table's first flow is its declared
    source; `tb.flow(...)` adds more. A flow declared `once` is read exactly once (a backfill never re-read)."""

    name: str
    source: Source
    once: bool = False


@dataclass(frozen=True)
class TableSpec:
    """Everything about one table: where rows come from, how they are shaped, and how each batch is written.

    `transform` is applied to the streaming DataFrame of the source; `sink` writes each micro-batch to
    `output` (and to `extra_outputs`, such as a quarantine table) idempotently.
    """

    output: OutputTable
    layer: Layer
    description: str
    source: Source
    transform: Callable[[DataFrame], DataFrame]
    sink: Sink
    keys: tuple[str, ...] = ()
    watermark: Watermark | None = None
    output_mode: OutputMode = "append"
    extra_outputs: tuple[OutputTable, ...] = ()
    maintenance: MaintenancePolicy = field(default_factory=MaintenancePolicy)
    # Further inputs: streams (TableSource, with their own watermark) and reference tables (StaticSource). The
    # transform is then called as transform(main, *secondary) in this order; see docs/streaming.md.
    secondary_sources: tuple[Source, ...] = ()
    # An extra output that receives the input rows Spark would drop as late instead of losing them (docs/streaming.md).
    late_table: str | None = None
    # Dataset-level data-quality expectations (pipelines/spec/expectations.py), run as Dagster asset checks.
    expectations: tuple[Expectation, ...] = ()
    # The format its tables are created in ("iceberg" or "delta"); None: the home's TRIBUTARY_TABLE_FORMAT.
    table_format: str | None = None
    # More flows into this table, after the one of `source` (`tb.flow`); each keeps its own checkpoint.
    flows: tuple[Flow, ...] = ()
    # Published into the serving PostgreSQL after each commit (`infra.serving`); declared with serve=, by
    # default every gold table.
    serve: bool = False

    def all_flows(self) -> tuple[Flow, ...]:
        """Every flow into the table: the declared source's first."""
        return (Flow(MAIN_FLOW, self.source), *self.flows)

    @property
    def name(self) -> str:
        """The table's `namespace.table` name."""
        return self.output.name

    @property
    def upstream(self) -> str | None:
        """The registry table this one reads, if any."""
        return self.source.streamed_table()

    @property
    def upstreams(self) -> tuple[str, ...]:
        """Every registry table this one reads: the main source first, then secondary streams and static tables."""
        main = (self.upstream,) if self.upstream else ()
        return (*main, *(t for s in self.secondary_sources if (t := s.read_table())))

    @property
    def streamed_upstreams(self) -> tuple[str, ...]:
        """The registry tables this one reads as streams (its checkpoint holds positions in their histories)."""
        main = (self.upstream,) if self.upstream else ()
        return (*main, *(t for s in self.secondary_sources if (t := s.streamed_table())))

    @property
    def files_table(self) -> str | None:
        """The table of per-file health a file-source spec writes (`<table>_files`), else None."""
        keeps = any(flow.source.keeps_file_health for flow in self.all_flows())
        return f"{self.name}{FILES_SUFFIX}" if keeps else None

    def outputs(self) -> tuple[OutputTable, ...]:
        """All tables this spec writes, the main one first (a file source's per-file health table last)."""
        files = (files_output(self.files_table),) if self.files_table else ()
        return (self.output, *self.extra_outputs, *files)


def files_output(name: str) -> OutputTable:
    """The per-file health table of a file source: one row per landed file (and per acknowledgement)."""
    from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType, TimestampType

    schema = StructType(
        [
            StructField("file", StringType()),
            StructField("status", StringType()),
            StructField("reason", StringType()),
            StructField("rows", LongType()),
            StructField("corrupt_rows", LongType()),
            StructField("rescued_rows", LongType()),
            StructField("new_fields", ArrayType(StringType())),
            StructField("recorded_at", TimestampType()),
            StructField("_batch_id", LongType()),
        ]
    )
    return OutputTable(name, schema)
