"""What a table is: one `TableSpec` per table (its source, output, write strategy and checks), and its parts."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from infra.errors import ConfigError
from infra.identifiers import COLUMN_PATTERN
from infra.kafka import OWN_KEYS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from pipelines.spec.expectations import Expectation
    from pipelines.spec.strategy import Sink

Layer = Literal["bronze", "silver", "gold"]
OutputMode = Literal["append", "update", "complete"]
SchemaEvolution = Literal["rescue", "add_new_columns", "fail"]
SCHEMA_EVOLUTION_MODES: tuple[SchemaEvolution, ...] = ("rescue", "add_new_columns", "fail")
FILES_SUFFIX = "_files"
LAYERS: tuple[Layer, ...] = ("bronze", "silver", "gold")
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_SORT_ITEM = re.compile(rf"^{COLUMN_PATTERN}( (asc|desc))?( nulls (first|last))?$", re.IGNORECASE)


@dataclass(frozen=True)
class FileSource:
    """Files landed under `<landing>/<dataset>/`, read incrementally with an explicit schema (docs/landing.md).

    `schema_evolution` says what a field the schema does not declare does: `rescue` keeps it in `_rescued_data`,
    `add_new_columns` adds it to the table as a nullable string column, `fail` stops the run naming the file.
    A file with at least `reject_file_ratio` of its rows corrupt is rejected whole (`pipelines.write.file_health`).
    With `archive`, files of committed batches move to `<home>/archive/<dataset>/` after each run
    (`pipelines.io.archive`), so the landing folder holds only what is new.
    """

    dataset: str
    format: Literal["json", "csv", "parquet"]
    schema: StructType
    max_files_per_trigger: int | None = None
    options: tuple[tuple[str, str], ...] = ()
    schema_evolution: SchemaEvolution = "rescue"
    reject_file_ratio: float = 0.5
    archive: bool = False

    def validate(self, table: str) -> None:
        """Raise ConfigError naming `table` and the field when a setting is invalid."""
        if not isinstance(self.archive, bool):
            raise ConfigError(f"table {table!r}: archive={self.archive!r} is invalid; use True or False")
        if self.schema_evolution not in SCHEMA_EVOLUTION_MODES:
            raise ConfigError(
                f"table {table!r}: schema_evolution={self.schema_evolution!r} is not one of "
                f"{', '.join(SCHEMA_EVOLUTION_MODES)}"
            )
        ratio = self.reject_file_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 < ratio <= 1:
            raise ConfigError(
                f"table {table!r}: reject_file_ratio={ratio!r} is invalid; it must be a number in (0, 1] "
                "(the share of corrupt rows at which a landed file is rejected whole; default 0.5)"
            )


@dataclass(frozen=True)
class KafkaSource:
    """Messages of Kafka topics, read in bounded runs into a bronze table (docs/kafka.md).

    Each run reads from the offsets committed with the table's last write up to the end offsets when it starts,
    in batches of at most `max_offsets_per_batch` messages, and commits each batch's rows with its end offsets in
    one table commit. `format` says how a value is parsed (`json` objects or `csv` lines by the schema's column
    order, `raw`: the value as text in a `value` column). Offsets deleted by retention before they were read stop
    the run unless `fail_on_data_loss` is False (then they are skipped and counted). `options` are librdkafka
    consumer settings for this source only.
    """

    topics: tuple[str, ...]
    format: Literal["json", "csv", "raw"]
    schema: StructType
    pattern: str | None = None
    max_offsets_per_batch: int = 100_000
    fail_on_data_loss: bool = True
    options: tuple[tuple[str, str], ...] = ()
    schema_evolution: SchemaEvolution = "rescue"

    @property
    def dataset(self) -> str:
        """What the source is called in messages: its topics or pattern."""
        return self.pattern or ",".join(self.topics)

    def validate(self, table: str) -> None:
        """Raise ConfigError naming `table` and the field when a setting is invalid."""
        if bool(self.topics) == bool(self.pattern):
            raise ConfigError(f"table {table!r}: a Kafka source names topics or a pattern (one of them)")
        bad = [t for t in self.topics if not _TOPIC.match(t)]
        if bad:
            raise ConfigError(f"table {table!r}: {bad[0]!r} is not a Kafka topic name (letters, digits, . _ -)")
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ConfigError(f"table {table!r}: Kafka topic pattern {self.pattern!r} is invalid: {exc}") from None
        if self.format not in ("json", "csv", "raw"):
            raise ConfigError(f"table {table!r}: Kafka value format {self.format!r} is not one of json, csv, raw")
        own = sorted(k for k, _ in self.options if k in OWN_KEYS)
        if own:
            raise ConfigError(
                f"table {table!r}: Kafka option {own[0]!r} is decided by Tributary (offsets are kept with the "
                "table); remove it from options (brokers: TRIBUTARY_KAFKA_BOOTSTRAP)"
            )
        size = self.max_offsets_per_batch
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"table {table!r}: max_offsets_per_batch={size!r} must be a positive integer")
        if self.schema_evolution == "add_new_columns" or self.schema_evolution not in SCHEMA_EVOLUTION_MODES:
            raise ConfigError(
                f"table {table!r}: schema_evolution={self.schema_evolution!r} is not supported for Kafka; "
                "use 'rescue' (unknown fields kept in _rescued_data) or 'fail'"
            )


LandingSource = FileSource | KafkaSource


@dataclass(frozen=True)
class TableSource:
    """The appends of an upstream table in the registry, read as a stream.

    `watermark` is for a secondary stream (`TableSpec.secondary_sources`); the main source uses `TableSpec.watermark`.
    """

    table: str
    watermark: Watermark | None = None


@dataclass(frozen=True)
class StaticSource:
    """A registry table read whole when a run starts: the reference side of a stream-static join."""

    table: str


@dataclass(frozen=True)
class Watermark:
    """Event-time column and how late rows may arrive before windows close.

    Rows whose event time is before `earliest` or more than `max_future` after the batch's time never reach
    the watermark (one row at year 9999 would close every window for good): they go to the spec's late table,
    or, without one, are counted as `rows_out_of_range` and left out.
    """

    column: str
    delay: str
    earliest: str = "1970-01-01"
    max_future: str = "1 day"


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


@dataclass(frozen=True)
class TableSpec:
    """Everything about one table: where rows come from, how they are shaped, and how each batch is written.

    `transform` is applied to the streaming DataFrame of the source; `sink` writes each micro-batch to
    `output` (and to `extra_outputs`, such as a quarantine table) idempotently.
    """

    output: OutputTable
    layer: Layer
    description: str
    source: FileSource | KafkaSource | TableSource
    transform: Callable[[DataFrame], DataFrame]
    sink: Sink
    keys: tuple[str, ...] = ()
    watermark: Watermark | None = None
    output_mode: OutputMode = "append"
    extra_outputs: tuple[OutputTable, ...] = ()
    maintenance: MaintenancePolicy = field(default_factory=MaintenancePolicy)
    # Further inputs: streams (TableSource, with their own watermark) and reference tables (StaticSource). The
    # transform is then called as transform(main, *secondary) in this order; see docs/streaming.md.
    secondary_sources: tuple[TableSource | StaticSource, ...] = ()
    # An extra output that receives the input rows Spark would drop as late instead of losing them (docs/streaming.md).
    late_table: str | None = None
    # Dataset-level data-quality expectations (pipelines/spec/expectations.py), run as Dagster asset checks.
    expectations: tuple[Expectation, ...] = ()
    # The format its tables are created in ("iceberg" or "delta"); None: the home's TRIBUTARY_TABLE_FORMAT.
    table_format: str | None = None

    @property
    def name(self) -> str:
        """The table's `namespace.table` name."""
        return self.output.name

    @property
    def upstream(self) -> str | None:
        """The registry table this one reads, if any."""
        return self.source.table if isinstance(self.source, TableSource) else None

    @property
    def upstreams(self) -> tuple[str, ...]:
        """Every registry table this one reads: the main source first, then secondary streams and static tables."""
        main = (self.upstream,) if self.upstream else ()
        return (*main, *(s.table for s in self.secondary_sources))

    @property
    def streamed_upstreams(self) -> tuple[str, ...]:
        """The registry tables this one reads as streams (its checkpoint holds positions in their histories)."""
        main = (self.upstream,) if self.upstream else ()
        return (*main, *(s.table for s in self.secondary_sources if isinstance(s, TableSource)))

    @property
    def files_table(self) -> str | None:
        """The table of per-file health a file-source spec writes (`<table>_files`), else None."""
        return f"{self.name}{FILES_SUFFIX}" if isinstance(self.source, FileSource) else None

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
