"""What a table reads, as declared: one frozen dataclass per source kind, and the event-time watermark of an
input. How each kind is read lives in `pipelines.sources` (`pipelines.sources.kinds.kind_of`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

from infra.errors import ConfigError
from infra.kafka import OWN_KEYS

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

SchemaEvolution = Literal["rescue", "add_new_columns", "fail"]
SCHEMA_EVOLUTION_MODES: tuple[SchemaEvolution, ...] = ("rescue", "add_new_columns", "fail")
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


class Source:
    """What a table reads, as declared. Each kind says here what the registry needs to know without Spark; how it
    is read, checked and accounted for lives in its strategy (`pipelines.sources`)."""

    # Read from outside the registry into a table (declared with `landing(...)` or `source=`), not from another
    # table's appends.
    ingests: ClassVar[bool] = False
    # Rows are parsed per batch (files or messages), each with its corrupt and rescued text, and accounted for.
    lands: ClassVar[bool] = False
    # May be a secondary input of a join (a stream of, or a reference read of, another registry table).
    secondary: ClassVar[bool] = False
    # What the source is called in messages.
    label: ClassVar[str] = "source"
    # The per-file health table `<table>_files` is written with the table.
    keeps_file_health: ClassVar[bool] = False
    # A new reader replays the upstream's appends from its first commit (a stream), rather than reading the
    # upstream whole on its first run (a table following changes).
    replays_appends: ClassVar[bool] = False
    watermark: Watermark | None = None

    def validate(self, table: str) -> None:
        """Raise ConfigError naming `table` and the field when a setting is invalid."""

    def read_table(self) -> str | None:
        """The registry table this source reads (as a stream or whole), if any."""
        return None

    def streamed_table(self) -> str | None:
        """The registry table this source reads as a stream (positions kept in the reader's checkpoint), if any."""
        return None

    def landing_folder_name(self) -> str | None:
        """The landing folder (dataset) this source reads, if any."""
        return None

    def archives(self) -> bool:
        """Whether the source moves what it read out of its landing folder after each run."""
        return False

    def describe(self) -> str:
        """What the source reads, in a few words (`tributary tables`): a table, a landing folder, or its kind."""
        if table := self.read_table():
            return table
        if folder := self.landing_folder_name():
            return f"{self.label} {folder}/"
        return self.label


@dataclass(frozen=True)
class FileSource(Source):
    """Files landed under `<landing>/<dataset>/`, read incrementally with an explicit schema (docs/landing.md).

    `schema_evolution` says what a field the schema does not declare does: `rescue` keeps it in `_rescued_data`,
    `add_new_columns` adds it to the table as a nullable string column, `fail` stops the run naming the file.
    A file with at least `reject_file_ratio` of its rows corrupt is rejected whole (`pipelines.sources.file_health`).
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

    ingests: ClassVar[bool] = True
    lands: ClassVar[bool] = True
    label: ClassVar[str] = "landed files"
    keeps_file_health: ClassVar[bool] = True

    def landing_folder_name(self) -> str | None:
        """The landing folder (dataset) this source reads."""
        return self.dataset

    def archives(self) -> bool:
        """Whether committed files move to the archive after each run."""
        return self.archive

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
class KafkaSource(Source):
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

    ingests: ClassVar[bool] = True
    lands: ClassVar[bool] = True
    label: ClassVar[str] = "Kafka"

    def describe(self) -> str:
        """`Kafka <topics or pattern>`."""
        return f"Kafka {self.dataset}"

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


@dataclass(frozen=True)
class TableSource(Source):
    """The appends of an upstream table in the registry, read as a stream.

    `watermark` is a secondary stream's own (`TableSpec.secondary_sources`; the main source's is `TableSpec.watermark`):
    each input of a join judges its rows by its own event-time column and delay.
    """

    table: str
    watermark: Watermark | None = None

    secondary: ClassVar[bool] = True
    label: ClassVar[str] = "table stream"
    replays_appends: ClassVar[bool] = True

    def read_table(self) -> str | None:
        """The upstream table whose appends are read."""
        return self.table

    def streamed_table(self) -> str | None:
        """The upstream table whose appends are read."""
        return self.table


@dataclass(frozen=True)
class TableChangesSource(Source):
    """The changes (inserts, updates, deletes) of an upstream registry table whose strategy updates or deletes rows
    (upsert, CDC, replace, recompute), followed by the table's own strategy (`pipelines.sources.table_changes`).

    `keys` are the upstream's key columns, by which an upserting reader recomputes the rows that changed.
    """

    table: str
    keys: tuple[str, ...] = ()

    label: ClassVar[str] = "table changes"

    def read_table(self) -> str | None:
        """The upstream table whose changes are followed."""
        return self.table

    def streamed_table(self) -> str | None:
        """The upstream table whose changes are followed (the reader keeps its position in it)."""
        return self.table


@dataclass(frozen=True)
class StaticSource(Source):
    """A registry table read whole when a run starts: the reference side of a stream-static join."""

    table: str

    secondary: ClassVar[bool] = True
    label: ClassVar[str] = "reference table"

    def read_table(self) -> str | None:
        """The reference table read whole."""
        return self.table


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
