"""Event-time windows a spec declares as its transform: tumbling, sliding and session windows.

    transform=WindowAggregate("event_time", "sliding", "10 minutes", slide="5 minutes",
                              group_by=("category",), aggregates=(("impressions", "count(*)"),))

The output has `window_start`, `window_end`, the group columns and one column per aggregate. The spec's
watermark (applied by the runner before the transform) decides when a window is final: in append mode a window
is written once the watermark passes its end; in update mode every change is upserted by window key (use
`keys` with `UpsertSink`). Session windows close `gap` after a key's last event and only support append mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from infra.errors import ConfigError

WindowKind = Literal["tumbling", "sliding", "session"]
KINDS: tuple[WindowKind, ...] = ("tumbling", "sliding", "session")


@dataclass(frozen=True)
class WindowAggregate:
    """Aggregates per event-time window (and group columns); callable as a spec transform.

    `duration` is the window length, or the inactivity gap of a session window; `slide` only for sliding
    windows. `aggregates` are (output column, Spark SQL aggregate expression) pairs written by the spec author.
    """

    time_column: str
    kind: WindowKind
    duration: str
    slide: str | None = None
    group_by: tuple[str, ...] = ()
    aggregates: tuple[tuple[str, str], ...] = (("events", "count(*)"),)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"window kind {self.kind!r} is not one of {KINDS}")
        if (self.kind == "sliding") != (self.slide is not None):
            raise ConfigError(f"a {self.kind} window {'needs' if self.kind == 'sliding' else 'takes no'} slide")
        if not self.aggregates:
            raise ConfigError("a window aggregate needs at least one (column, expression) aggregate")

    @property
    def keys(self) -> tuple[str, ...]:
        """The columns that identify one output row (the MERGE key in update mode)."""
        return ("window_start", "window_end", *self.group_by)

    def window_column(self) -> Column:
        """The window struct for each row."""
        if self.kind == "session":
            return F.session_window(self.time_column, self.duration)
        if self.kind == "sliding":
            return F.window(self.time_column, self.duration, self.slide)
        return F.window(self.time_column, self.duration)

    def __call__(self, df: DataFrame) -> DataFrame:
        """Aggregate the (watermarked) stream per window and group."""
        window = self.window_column().alias("window")
        return (
            df.groupBy(window, *self.group_by)
            .agg(*[F.expr(expr).alias(name) for name, expr in self.aggregates])
            .select(
                F.col("window.start").alias("window_start"),
                F.col("window.end").alias("window_end"),
                *self.group_by,
                *[name for name, _ in self.aggregates],
            )
        )
