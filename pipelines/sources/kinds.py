"""The one place a source declaration's class picks its kind (`pipelines.sources.base.SourceKind`); everything
else asks the kind. A new kind is one module plus one line here."""

from __future__ import annotations

from pyspark.sql import SparkSession

from pipelines.io.formats import TableFormats
from pipelines.sources.base import SourceKind
from pipelines.sources.delta_changes import DeltaChangesKind, DeltaChangesSource
from pipelines.sources.files import FileKind
from pipelines.sources.kafka import KafkaKind
from pipelines.sources.static_table import StaticKind
from pipelines.sources.table_stream import TableStreamKind
from pipelines.spec.sources import FileSource, KafkaSource, Source, StaticSource, TableSource
from pipelines.spec.tables import TableSpec

_KINDS: dict[type[Source], type[SourceKind]] = {
    FileSource: FileKind,
    KafkaSource: KafkaKind,
    TableSource: TableStreamKind,
    StaticSource: StaticKind,
    DeltaChangesSource: DeltaChangesKind,
}


def kind_of(source: Source) -> SourceKind:
    """The kind that reads `source` (a new instance: a kind keeps the state of one run)."""
    return _KINDS[type(source)](source)


def prepare_tables(spark: SparkSession, fmt: TableFormats, spec: TableSpec) -> None:
    """Create `spec`'s output tables if missing, as its source kind needs them."""
    kind_of(spec.source).prepare_tables(spark, fmt, spec)
