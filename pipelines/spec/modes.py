"""Which output modes a spec may use, checked before any query starts.

Two checks with clear messages naming the table:

* `check_spec_modes` (called by the Registry, no Spark): the sink must support the mode — `update` re-emits a
  window each time it changes, so it needs an upsert sink; `complete` re-emits the whole result, so it needs a
  sink that replaces the table — and the late-data and secondary-source declarations must fit together.
* `check_query_mode` (called by the runner on the built, not yet started, streaming DataFrame): Spark's own
  checker of streaming plans (the one `start()` runs), e.g. append on an aggregation without a watermark, or
  complete on a query without aggregation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.errors import ConfigError
from pipelines.spec.plans import grouped_without_event_time, has_watermark
from pipelines.spec.tables import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


OUTPUT_MODES = ("append", "update", "complete")
_SINK_FOR_MODE = {
    "append": "an appending sink (AppendSink)",
    "update": "an upsert sink that MERGEs by key (pipelines.write.merge.UpsertSink)",
    "complete": "a sink that replaces the whole table (pipelines.write.merge.OverwriteSink)",
}
# Spark's checker message (start) -> what to change in the spec.
_HINTS = (
    (
        "without watermark",
        "declare a watermark on the event-time column (watermark=('event_time', '10 minutes')) so windows can "
        "close, or write it with an upsert (update mode)",
    ),
    ("no streaming aggregations", "complete mode re-emits a whole aggregate; use 'append' for this query"),
    ("not supported in Update output mode", "a stream-stream join emits each match once: use 'append'"),
    ("session window", "session windows are emitted once final: use 'append'"),
)


def check_spec_modes(spec: TableSpec) -> None:
    """Static checks of a spec's output mode, secondary sources and late-data table (no Spark needed)."""
    name = spec.name
    if spec.output_mode not in OUTPUT_MODES:
        raise ConfigError(f"table {name!r}: output_mode {spec.output_mode!r} is not one of {OUTPUT_MODES}")
    supported = spec.sink.output_modes
    if spec.output_mode not in supported:
        raise ConfigError(
            f"table {name!r}: output mode {spec.output_mode!r} cannot be written by {type(spec.sink).__name__} "
            f"(it supports {', '.join(supported)}); {spec.output_mode} mode needs {_SINK_FOR_MODE[spec.output_mode]}"
        )
    for source in spec.secondary_sources:
        if not source.secondary:
            raise ConfigError(
                f"table {name!r}: secondary source {source!r} must be a TableSource (a stream) or a "
                "StaticSource (a reference table); land files into a bronze table first"
            )
    if spec.secondary_sources and spec.source.streamed_table() is None:
        raise ConfigError(
            f"table {name!r}: a spec with secondary sources must read a registry table (TableSource) as its main "
            "source, so that all its streams use the same trigger"
        )
    if spec.late_table is None:
        return
    if spec.late_table not in {out.name for out in spec.extra_outputs}:
        raise ConfigError(
            f"table {name!r}: late_table {spec.late_table!r} must also be declared in extra_outputs "
            "(e.g. extra_outputs=(late_output('<table>_late'),))"
        )
    if spec.watermark is None:
        raise ConfigError(f"table {name!r}: late_table needs a watermark (TableSpec.watermark) to define lateness")
    if spec.output_mode == "complete":
        raise ConfigError(f"table {name!r}: late_table cannot be used in complete mode, which has no watermark")
    for source in spec.secondary_sources:
        if source.streamed_table() and source.watermark is None:
            raise ConfigError(
                f"table {name!r}: secondary stream {source.streamed_table()!r} needs a watermark when the spec has a "
                "late_table (lateness is judged on every stream)"
            )


def check_query_mode(spec: TableSpec, df: DataFrame) -> None:
    """Run Spark's streaming plan checker for the spec's output mode; raise ConfigError before the query starts.

    The message names the cause, not the first rule Spark tripped on: a query no output mode can stream
    (a distinct aggregation) says so, and an aggregation that groups watermarked rows by no event-time column
    says that a window is missing, not a watermark.
    """
    reason = _refusal(df, spec.output_mode)
    if reason is None:
        return
    name = spec.name
    others = {mode: _refusal(df, mode) for mode in OUTPUT_MODES if mode != spec.output_mode}
    if any("Distinct aggregations" in r for r in (reason, *others.values()) if r):
        raise ConfigError(
            f"table {name!r}: this query cannot run as a stream in any output mode: a distinct aggregation "
            "(count(DISTINCT ...), countDistinct) cannot be kept up to date from appended rows; compute it in a "
            "table declared with write=tb.recompute(by=<its group columns>), which re-aggregates each touched "
            "group over all its rows, or use approx_count_distinct()"
        )
    groups = grouped_without_event_time(df)
    append = reason if spec.output_mode == "append" else others["append"]
    if groups is not None and append and "without watermark" in append and has_watermark(df):
        keys = ", ".join(groups) or "nothing (one total)"
        time = spec.watermark.column if spec.watermark else "event_time"
        raise ConfigError(
            f"table {name!r}: the query groups watermarked rows by {keys} without an event-time window, so no "
            f"group is ever final and append mode cannot write it; group by a window as well "
            f"(F.window('{time}', '10 minutes')), or keep this table's rows as they are and aggregate them in "
            f"a second table declared with write=tb.recompute(by={tuple(groups)!r})"
        )
    hint = next((h for marker, h in _HINTS if marker in reason), "change the output mode or the query")
    if all(others.values()):
        raise ConfigError(
            f"table {name!r}: no output mode can stream this query ({spec.output_mode}: {reason}); {hint}"
        )
    raise ConfigError(
        f"table {name!r}: output mode {spec.output_mode!r} is not possible for this query: {reason}; {hint}"
    )


def _refusal(df: DataFrame, mode: str) -> str | None:
    """Spark's reason for refusing to stream `df` in `mode`, or None when the plan checker accepts it."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import AnalysisException

    jvm = df.sparkSession._jvm
    output_mode = getattr(jvm.org.apache.spark.sql.streaming.OutputMode, mode.capitalize())()
    checker = jvm.org.apache.spark.sql.catalyst.analysis.UnsupportedOperationChecker
    try:
        checker.checkForStreaming(df._jdf.queryExecution().analyzed(), output_mode)
    except (Py4JJavaError, AnalysisException) as exc:
        return _reason(exc)
    return None


def _reason(exc: Exception) -> str:
    text = str(getattr(exc, "java_exception", None) or exc)
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("An error occurred", "at ")):
            line = line.split("AnalysisException: ", 1)[-1]
            return line.rstrip(";")
    return type(exc).__name__
