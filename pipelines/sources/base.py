"""The protocol every source kind implements, and the run state a kind shares with the runner.

A declaration (`pipelines.spec.tables.Source`: files, Kafka, a table stream, a reference table) says what a table
reads; its kind (`pipelines.sources.kinds.kind_of`) says how: the checks before a run, whether there is anything to
read, how batches are read and written, the bookkeeping after them, and what the reconciliation, the sensors and
the authoring layer need to know. The runner (`pipelines.run.runner`) is one loop over these calls.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from infra.errors import ConfigError, PipelineError
from infra.spark import Session, running_session, started_session
from pipelines.spec.tables import MAIN_FLOW
from pipelines.write.sinks import no_fence

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructField

    from infra.settings import Settings
    from infra.stopwatch import Stopwatch
    from pipelines.io.formats import DayRange, TableFormat, TableFormats
    from pipelines.sources.file_health import FileHealth
    from pipelines.sources.report import RunReport
    from pipelines.spec.expectations import Expectation
    from pipelines.spec.sources import Source
    from pipelines.spec.tables import TableSpec
    from pipelines.write.ranges import RangeReport


def flow_checkpoint(settings: Settings, table: str, flow: str = MAIN_FLOW) -> Path:
    """A flow's checkpoint folder: the table's own for its main flow, `flows/<name>` inside it for the others, so
    adding a flow leaves the others' positions as they are and a full refresh (which deletes the table's folder)
    resets every flow."""
    folder = settings.checkpoint_for(table)
    return folder if flow == MAIN_FLOW else folder / "flows" / flow


@dataclass
class Run:
    """One bounded run of one table, in progress: what the runner and the table's source kind share."""

    session: Session
    settings: Settings
    fmt: TableFormats
    spec: TableSpec
    clock: Stopwatch
    report: RunReport
    metrics: Counter[str] = field(default_factory=Counter)
    files: list[FileHealth] = field(default_factory=list)
    # The flow being run (`TableSpec.all_flows`): the table's declared source is its main flow.
    flow: str = MAIN_FLOW
    # Called before every commit: raises when the run lost its table's writer lock (`pipelines.run.locks`).
    fence: Callable[[], None] = no_fence

    @property
    def checkpoint(self) -> Path:
        """The flow's checkpoint folder (`flow_checkpoint`)."""
        return flow_checkpoint(self.settings, self.spec.name, self.flow)

    def running(self) -> SparkSession | None:
        """The Spark session if one runs already (reading metadata needs none)."""
        return running_session(self.session)

    def spark(self) -> SparkSession:
        """The Spark session, started on first use."""
        self.session = started_session(self.session, self.settings)
        return self.session


@dataclass
class Accounting:
    """What a landing source delivered against the rows its table holds: the first outcome of the reconciliation
    (`quality.reconcile`), per file or per partition."""

    name: str
    success: bool
    observed: str
    element_count: int
    unexpected_count: int
    samples: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class SourceKind:
    """How one kind of source is read. Subclasses set the class attributes and override what differs."""

    # What the run reports as its trigger.
    trigger: ClassVar[str] = "availableNow"
    # The kind has a lag a sensor can watch (`partition_lag`).
    has_lag: ClassVar[bool] = False

    def __init__(self, source: Source) -> None:
        self.source = source

    # Authoring: what the declared function receives and what every table of the kind is checked for.

    def lineage(self) -> tuple[StructField, ...]:
        """The columns added to each landed row (after the declared fields)."""
        return ()

    def landing_checks(self) -> tuple[Expectation, ...]:
        """Expectations every bronze table fed by this kind gets."""
        return ()

    def row_checks(self) -> tuple[Expectation, ...]:
        """Expectations every table fed by this kind gets, in any layer."""
        return ()

    def evolves_columns(self) -> bool:
        """Whether the table may hold columns the declaration does not (`schema_evolution='add_new_columns'`)."""
        return False

    # The run.

    def prepare_tables(self, spark: SparkSession, fmt: TableFormats, spec: TableSpec) -> None:
        """Create the spec's output tables if missing, in the spec's format (a bronze table whose source adds new
        columns may hold more columns than declared)."""
        evolving = self.evolves_columns()
        for out in spec.outputs():
            fmt.ensure_table(spark, out, evolving and out.name == spec.name, spec.table_format)

    def check(self, run: Run) -> None:
        """Checks before anything is read (the runner holds the table's lock); raise PipelineError naming the fault."""

    def nothing_to_read(self, run: Run) -> bool:
        """Whether no batch could run, so the run can stop without starting a query (or a JVM)."""
        return False

    def read_batches(self, run: Run) -> None:
        """Read and write every available batch, recording what was done in `run`."""
        raise NotImplementedError

    def after_run(self, run: Run, skipped: bool) -> None:
        """Bookkeeping once every batch is committed (also when the run was skipped)."""

    # Operations, reconciliation and sensors.

    def received_files(self, settings: Settings) -> dict[str, Path] | None:
        """Every file the source received (landed or archived) by canonical path; None when what was received is
        kept with the table's own commits (offsets)."""
        return None

    def accounting(self, spark: SparkSession, settings: Settings, spec: TableSpec, flow: str) -> Accounting:
        """What the source, as the table's flow `flow`, delivered against the rows of `spec`'s table."""
        raise PipelineError(f"table {spec.name}: a {self.source.label} source has nothing landed to account for")

    def reprocess(
        self,
        spark: SparkSession,
        settings: Settings,
        fmt: TableFormat,
        spec: TableSpec,
        days: DayRange,
        report: RangeReport,
    ) -> None:
        """Re-derive the days of `days` of `spec`'s table from this source and replace them in one commit."""
        raise ConfigError(
            f"table {spec.name}: reprocess supports file-source tables with an AppendSink (bronze) and table-source "
            "tables with a ValidateDedupeSink (silver); backfill recompute-and-merge tables by day, or full-refresh "
            "(a Kafka-fed table is rebuilt from what its topics still retain)"
        )

    def partition_lag(self, settings: Settings, spec: TableSpec, flow: str) -> dict[tuple[str, int], int]:
        """Messages behind per partition now (kinds with `has_lag`)."""
        return {}
