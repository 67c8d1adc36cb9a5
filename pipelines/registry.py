"""The declarative table registry: one `TableSpec` per table, from which runs, assets and checks follow."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from infra.errors import ConfigError
from infra.identifiers import validate_table_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from pipelines.sinks import Sink

Layer = Literal["bronze", "silver", "gold"]
OutputMode = Literal["append", "update", "complete"]
LAYERS: tuple[Layer, ...] = ("bronze", "silver", "gold")


@dataclass(frozen=True)
class FileSource:
    """Files landed under `<landing>/<dataset>/`, read incrementally with an explicit schema."""

    dataset: str
    format: Literal["json", "csv", "parquet"]
    schema: StructType
    max_files_per_trigger: int | None = None
    options: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class TableSource:
    """The appends of an upstream table in the registry, read as a stream."""

    table: str


@dataclass(frozen=True)
class Watermark:
    """Event-time column and how late rows may arrive before windows close."""

    column: str
    delay: str


@dataclass(frozen=True)
class OutputTable:
    """A table a spec's sink writes: its name, schema and Iceberg partition transforms."""

    name: str
    schema: StructType
    partition_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class MaintenancePolicy:
    """How a table is kept healthy (compaction and retention); see the maintenance assets."""

    target_file_size_mb: int = 128
    snapshot_retention_days: int = 7
    min_snapshots_to_keep: int = 5
    orphan_retention_days: int = 3


@dataclass(frozen=True)
class TableSpec:
    """Everything about one table: where rows come from, how they are shaped, and how each batch is written.

    `transform` is applied to the streaming DataFrame of the source; `sink` writes each micro-batch to
    `output` (and to `extra_outputs`, such as a quarantine table) idempotently.
    """

    output: OutputTable
    layer: Layer
    description: str
    source: FileSource | TableSource
    transform: Callable[[DataFrame], DataFrame]
    sink: Sink
    keys: tuple[str, ...] = ()
    watermark: Watermark | None = None
    output_mode: OutputMode = "append"
    extra_outputs: tuple[OutputTable, ...] = ()
    maintenance: MaintenancePolicy = field(default_factory=MaintenancePolicy)

    @property
    def name(self) -> str:
        """The table's `namespace.table` name."""
        return self.output.name

    @property
    def upstream(self) -> str | None:
        """The registry table this one reads, if any."""
        return self.source.table if isinstance(self.source, TableSource) else None

    def outputs(self) -> tuple[OutputTable, ...]:
        """All tables this spec writes, the main one first."""
        return (self.output, *self.extra_outputs)


class Registry:
    """An ordered, validated set of table specs."""

    def __init__(self, specs: Iterable[TableSpec]):
        self._specs: dict[str, TableSpec] = {}
        written: set[str] = set()
        for spec in specs:
            for out in spec.outputs():
                validate_table_name(out.name)
                if out.name in written:
                    raise ConfigError(f"table {out.name!r} is declared twice in the registry")
                written.add(out.name)
            if spec.layer not in LAYERS:
                raise ConfigError(f"table {spec.name!r}: layer {spec.layer!r} is not one of {LAYERS}")
            if spec.output.name.split(".")[0] != spec.layer:
                raise ConfigError(f"table {spec.name!r} must live in the {spec.layer!r} namespace")
            if spec.upstream is not None and spec.upstream not in self._specs:
                raise ConfigError(
                    f"table {spec.name!r} reads {spec.upstream!r}, which is not declared before it in the registry"
                )
            self._specs[spec.name] = spec

    def __iter__(self) -> Iterator[TableSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def get(self, name: str) -> TableSpec:
        """The spec for `name`, or a ConfigError listing the tables that exist."""
        validate_table_name(name)
        try:
            return self._specs[name]
        except KeyError:
            raise ConfigError(f"no table {name!r} in the registry; known tables: {', '.join(self._specs)}") from None

    def downstream_of(self, name: str) -> list[TableSpec]:
        """Specs that read `name` directly."""
        return [s for s in self._specs.values() if s.upstream == name]
