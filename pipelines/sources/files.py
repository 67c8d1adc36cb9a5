"""Files landed in a folder (JSON lines, CSV, Parquet; docs/landing.md): checked before the run, parsed and
checked file by file in each batch (`pipelines.sources.file_health`), accounted for line by line, and archived
after the run when the declaration says so."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame

from infra.paths import canonical_all
from pipelines.io.archive import archive_committed, received_files
from pipelines.io.checkpoints import caught_up_offsets
from pipelines.io.file_source_log import seen_files
from pipelines.io.json_reader import ProofAhead
from pipelines.io.landing import landing_folder, unread_subfolders
from pipelines.io.landing_parse import LANDED_LINEAGE, CsvHeaders
from pipelines.io.sources import (
    check_all_read,
    check_landed_files,
    check_landing,
    csv_headers,
    find_unreadable_file,
    landed_files,
    prove_ahead,
    read_files,
)
from pipelines.sources import file_health
from pipelines.sources.base import Accounting, Run
from pipelines.sources.landed_lines import landed_vs_bronze
from pipelines.sources.report import count_rows_in
from pipelines.sources.reread import reread_files
from pipelines.sources.stream_query import StreamedKind
from pipelines.spec.expectations import not_null
from pipelines.spec.sources import FileSource
from pipelines.spec.tables import TableSpec
from pipelines.write.sinks import BatchContext

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructField

    from infra.settings import Settings
    from pipelines.io.formats import DayRange, TableFormat
    from pipelines.spec.expectations import Expectation
    from pipelines.write.ranges import RangeReport

# Every landed row says where and when it landed, and in which batch.
LANDING_CHECKS = (not_null("_source_file"), not_null("_ingested_at"), not_null("_batch_id"))


class FileKind(StreamedKind):
    """A landing folder read by a file stream (`FileSource`)."""

    source: FileSource

    def __init__(self, source: FileSource) -> None:
        super().__init__(source)
        # The files landed when the run started (canonical path -> path); None when the folder does not exist.
        self.landed: dict[str, Path] | None = None
        # The JSON reader's proof of the landed files not read yet, started with the query (`prove_ahead`).
        self.ahead: ProofAhead | None = None

    def lineage(self) -> tuple[StructField, ...]:
        """The landed file and time of each row."""
        return LANDED_LINEAGE

    def landing_checks(self) -> tuple[Expectation, ...]:
        """Every landed row names its file, time and batch."""
        return LANDING_CHECKS

    def evolves_columns(self) -> bool:
        """New fields become columns under `schema_evolution='add_new_columns'`."""
        return self.source.schema_evolution == "add_new_columns"

    def check(self, run: Run) -> None:
        """Refuse landed files Spark would misread or skip; note a missing folder and unread subfolders."""
        folder = landing_folder(run.settings, self.source)
        if not folder.is_dir():
            run.report.note = f"nothing has landed yet: landing folder {folder} does not exist"
            return
        self.landed = check_landed_files(run.settings, self.source, run.spec.name, run.checkpoint)
        names = unread_subfolders(folder)
        if names:
            run.report.landing_warnings = [
                f"table {run.spec.name}: landing folder {folder} holds subfolder(s) {', '.join(names)} whose files "
                "are not read (landing is not recursive); move those files into the landing folder itself"
            ]

    def caught_up(self, run: Run) -> bool:
        """Nothing landed, or every landed file is in the stream's file log and its last batch owes nothing."""
        landed = check_landing(run.settings, self.source, run.spec.name)
        if not landed:
            return True
        read = seen_files(run.checkpoint)
        return caught_up_offsets(run.checkpoint) is not None and set(canonical_all(map(str, landed))) <= read.keys()

    def headers(self, run: Run) -> CsvHeaders | None:
        """The CSV headers of the files landed now (read again when the query restarts)."""
        if self.landed is None:
            return None
        return csv_headers(self.source, list(landed_files(run.settings, self.source).values()))

    def frame(self, run: Run, headers: CsvHeaders | None) -> DataFrame:
        """The landed lines with their lineage (the declared function runs per batch, after the checks); the
        JSON reader's proof of the unread files starts here, to run while the query starts."""
        self.ahead = prove_ahead(run.spark(), self.source, self.landed, run.checkpoint)
        return read_files(run.spark(), run.settings, self.source)

    def write_batch(self, ctx: BatchContext, df: DataFrame, spec: TableSpec, headers: CsvHeaders | None) -> None:
        """Check the batch file by file, then write its rows and its files' health."""
        file_health.write_landed(ctx, df, spec, headers, self.ahead)

    def explain_failure(self, run: Run) -> str | None:
        """Name the first landed file that cannot be read to the end."""
        unreadable = find_unreadable_file(run.settings, self.source)
        if unreadable is None:
            return None
        path, reason = unreadable
        return (
            f"landing file {path} cannot be read ({reason}); fix or remove it and re-run (nothing of the failed "
            "batch was committed)"
        )

    def count_rows(self, run: Run) -> None:
        """Rows in are the landed records, not the lines the stream counted."""
        count_rows_in(
            run.report,
            run.metrics.pop(file_health.LANDED_ROWS, 0),
            run.metrics.pop(file_health.LANDED_BATCHES, 0),
        )

    def rows_so_far(self, run: Run, done: list[dict[str, Any]]) -> int:
        """The landed records of the batches written so far."""
        return run.metrics[file_health.LANDED_ROWS]

    def after_run(self, run: Run, skipped: bool) -> None:
        """Every file landed when the run started was read (fingerprinted); then archive them if declared. A
        skipped run does it too: it fingerprints (and archives) files a killed run left unrecorded."""
        if self.landed is None:
            return
        with run.clock.stage("all_read"):
            check_all_read(run.spec.name, self.landed, run.checkpoint)
        if self.source.archive:
            with run.clock.stage("archive"):
                run.metrics["files_archived"] = archive_committed(
                    run.settings, self.source, run.checkpoint, self.landed
                )

    def received_files(self, settings: Settings) -> dict[str, Path] | None:
        """Every file landed or archived."""
        return received_files(settings, self.source)

    def accounting(self, spark: SparkSession, settings: Settings, spec: TableSpec, flow: str) -> Accounting:
        """Landed lines = bronze rows, file by file."""
        return landed_vs_bronze(spark, settings, spec, self.source, flow)

    def reprocess(
        self,
        spark: SparkSession,
        settings: Settings,
        fmt: TableFormat,
        spec: TableSpec,
        days: DayRange,
        report: RangeReport,
    ) -> None:
        """Read again the landing files first ingested on `days` (an appending table), replacing those days."""
        if spec.sink.reprocess_by != "reread_files":
            super().reprocess(spark, settings, fmt, spec, days, report)
        reread_files(spark, settings, fmt, spec, days, report)
