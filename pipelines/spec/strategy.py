"""What the platform may ask of a table's write strategy (its sink), declared once for every caller.

A strategy says what it can do through class-level capabilities; callers (modes, reprocess, backfills, daily
partitions, reconciliation) read these instead of testing for concrete sink classes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# How `reprocess` re-derives a range of days: re-read the landed files, or re-validate the upstream rows.
Reprocess = Literal["reread_files", "revalidate"]


class Sink:
    """Base of every write strategy: writes one micro-batch to the spec's tables."""

    # What the strategy is called where tables are listed (`tributary tables`).
    label: ClassVar[str] = "custom"
    # Output modes the strategy can write (`pipelines.spec.modes`).
    output_modes: ClassVar[tuple[str, ...]] = ("append",)
    # How a range of days is reprocessed (`pipelines.ops.reprocess`); None: it cannot be.
    reprocess_by: ClassVar[Reprocess | None] = None
    # Whether rows of given partition keys can be recomputed from upstream (`recompute`): backfills and
    # Dagster daily partitions.
    recomputes_by_key: ClassVar[bool] = False
    # Whether rows failing rules go to a quarantine table (`quarantine_table`): row reconciliation.
    quarantines: ClassVar[bool] = False
    # Whether the strategy only ever adds rows to its table. One that updates or deletes rows (a MERGE, an
    # overwrite) is read downstream through its change feed, by a strategy that `follow`s changes.
    appends_only: ClassVar[bool] = True

    def write(self, ctx: Any, df: DataFrame) -> None:
        """Write `df` (one micro-batch) to the spec's tables; `ctx` is a `pipelines.write.sinks.BatchContext`."""
        raise NotImplementedError(f"{type(self).__name__} does not implement write()")

    def follow(self, ctx: Any, change: Any) -> None:
        """Bring the table up to date with what changed upstream (`change`: a `pipelines.write.follow.
        UpstreamChange`), in one commit. Only strategies that can take a row back implement it; the others are
        refused downstream of a changing table when the dataset loads (`pipelines.authoring.build`)."""
        raise NotImplementedError(f"{type(self).__name__} cannot follow an upstream's updates and deletes")
