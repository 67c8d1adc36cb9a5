"""The one place a source declaration's class picks its kind (`pipelines.sources.base.SourceKind`); everything
else asks the kind. A new kind is one module plus one line here."""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import SparkSession
from pyspark.sql.types import StructField

from infra.settings import Settings
from pipelines.io.formats import TableFormats
from pipelines.sources.base import Accounting, SourceKind
from pipelines.sources.delta_changes import DeltaChangesKind, DeltaChangesSource
from pipelines.sources.files import FileKind
from pipelines.sources.kafka import KafkaKind
from pipelines.sources.static_table import StaticKind
from pipelines.sources.table_changes import TableChangesKind
from pipelines.sources.table_stream import TableStreamKind
from pipelines.spec.sources import FileSource, KafkaSource, Source, StaticSource, TableChangesSource, TableSource
from pipelines.spec.tables import TableSpec

_KINDS: dict[type[Source], type[SourceKind]] = {
    FileSource: FileKind,
    KafkaSource: KafkaKind,
    TableSource: TableStreamKind,
    StaticSource: StaticKind,
    DeltaChangesSource: DeltaChangesKind,
    TableChangesSource: TableChangesKind,
}


def kind_of(source: Source) -> SourceKind:
    """The kind that reads `source` (a new instance: a kind keeps the state of one run)."""
    return _KINDS[type(source)](source)


def prepare_tables(spark: SparkSession, fmt: TableFormats, spec: TableSpec) -> None:
    """Create `spec`'s output tables if missing, as its source kind needs them."""
    kind_of(spec.source).prepare_tables(spark, fmt, spec)


def lineage_of(sources: Iterable[Source]) -> tuple[StructField, ...]:
    """The lineage columns of a table fed by `sources` (its flows): each kind's, in order, each column once (a
    row from a flow of another kind holds NULL in the columns its kind does not add)."""
    seen: dict[str, StructField] = {}
    for source in sources:
        for column in kind_of(source).lineage():
            seen.setdefault(column.name, column)
    return tuple(seen.values())


def accounting(spark: SparkSession, settings: Settings, spec: TableSpec) -> Accounting:
    """What every flow of `spec`'s table delivered against its rows (`SourceKind.accounting`), as one outcome."""
    parts = [(f.name, kind_of(f.source).accounting(spark, settings, spec, f.name)) for f in spec.all_flows()]
    if len(parts) == 1:
        return parts[0][1]

    def named(flow: str, lines: list[str]) -> list[str]:
        return [f"flow {flow}: {line}" for line in lines]

    return Accounting(
        name=" and ".join(part.name for _, part in parts),
        success=all(part.success for _, part in parts),
        observed="; ".join(f"flow {flow}: {part.observed}" for flow, part in parts),
        element_count=sum(part.element_count for _, part in parts),
        unexpected_count=sum(part.unexpected_count for _, part in parts),
        samples=[line for flow, part in parts for line in named(flow, part.samples)],
        notes=[line for flow, part in parts for line in named(flow, part.notes)],
    )
