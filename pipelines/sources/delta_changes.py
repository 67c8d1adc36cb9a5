"""The change data feed of a Delta table kept outside the registry (another team's or system's table), read into a
table of ours: `tb.landing("bronze.customer_changes", tb.delta_changes("/data/crm/customers"))`.

The first run reads the table as it is then (every row an `insert` at that version); every later run reads the
inserts, updates (`update_preimage` and `update_postimage`) and deletes committed since, each row with its
`_change_type`, `_commit_version` and `_commit_timestamp`, exactly once (the Spark checkpoint keeps the versions
read, and each append is tagged with its batch like every table stream's). A run with no new version starts no
query. The table must record its changes (`delta.enableChangeDataFeed = true`) from the first version read; the
run says so, naming the table, when it does not. Its schema is read from its Delta log when the dataset loads.

This kind is the whole of it: the declaration, how it is read, and its registration (`pipelines.sources.kinds`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from deltalake import DeltaTable
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from infra.errors import ConfigError, PipelineError
from infra.spark_functions import batch_time
from pipelines.io.checkpoints import settled_offsets
from pipelines.io.delta_feed import FEED_PROPERTY, records_changes
from pipelines.io.delta_source import version_read
from pipelines.sources.base import Run
from pipelines.sources.stream_query import StreamedKind
from pipelines.spec.sources import Source

if TYPE_CHECKING:
    from pipelines.io.landing_parse import CsvHeaders
    from pipelines.spec.tables import TableSpec
    from pipelines.write.sinks import BatchContext

CHANGE_LINEAGE = (
    StructField("_change_type", StringType()),
    StructField("_commit_version", LongType()),
    StructField("_commit_timestamp", TimestampType()),
    StructField("_ingested_at", TimestampType()),
)


@dataclass(frozen=True)
class DeltaChangesSource(Source):
    """The change data feed of the Delta table at `path` (a local folder holding a `_delta_log`)."""

    path: str

    ingests: ClassVar[bool] = True
    label: ClassVar[str] = "Delta change feed"

    @property
    def dataset(self) -> str:
        """What the source is called in messages: its path."""
        return self.path

    @property
    def schema(self) -> StructType:
        """The table's columns, from its Delta log (Delta stores Spark's own schema JSON)."""
        return StructType.fromJson(json.loads(_table(self.path).schema().to_json()))

    def validate(self, table: str) -> None:
        """The path holds a Delta table."""
        if not DeltaTable.is_deltatable(self.path):
            raise ConfigError(
                f"table {table!r}: delta_changes({self.path!r}) names no Delta table (no _delta_log there); "
                "check the path, or create the table first"
            )


def delta_changes(path: str | Path) -> DeltaChangesSource:
    """Every change committed to the Delta table at `path`: inserts, updates (pre and post image), deletes."""
    return DeltaChangesSource(str(Path(path).expanduser().resolve()))


def _table(path: str) -> DeltaTable:
    if not DeltaTable.is_deltatable(path):
        raise ConfigError(f"delta_changes({path!r}) names no Delta table (no _delta_log there); check the path")
    return DeltaTable(path)


class DeltaChangesKind(StreamedKind):
    """Reads a `DeltaChangesSource` with Spark's Delta stream (`readChangeFeed`)."""

    source: DeltaChangesSource

    def lineage(self) -> tuple[StructField, ...]:
        """The change's type, version and commit time, then when it was read."""
        return CHANGE_LINEAGE

    def check(self, run: Run) -> None:
        """The table exists and records its changes."""
        path = self.source.path
        table = _table(path)
        if not records_changes(table):
            raise PipelineError(
                f"table {run.spec.name}: the Delta table at {path} does not record its changes; run "
                f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({FEED_PROPERTY} = true) "
                "(changes before that cannot be read)"
            )

    def caught_up(self, run: Run) -> bool:
        """The checkpoint has read every version of the table (no Spark needed)."""
        settled = settled_offsets(run.checkpoint)
        if not settled:
            return False
        table = _table(self.source.path)
        offsets = [o for o in settled if o.get("reservoirId") == str(table.metadata().id)]
        if not offsets:
            return False
        return version_read(offsets[0]) >= table.version()

    def frame(self, run: Run, headers: CsvHeaders | None) -> DataFrame:
        """The change feed; each batch stamps the time it read its changes (`write_batch`)."""
        return run.spark().readStream.format("delta").option("readChangeFeed", "true").load(self.source.path)

    def write_batch(self, ctx: BatchContext, df: DataFrame, spec: TableSpec, headers: CsvHeaders | None) -> None:
        """The declared function over the batch's changes, stamped with the time they were read, appended through
        the table's sink. The stamp is no literal in the generated code, so every batch reuses the compiled query."""
        read_at = batch_time(df.sparkSession, datetime.now(UTC), F.col("_commit_version").isNull())
        spec.sink.write(ctx, spec.transform(df.withColumn("_ingested_at", read_at)))
