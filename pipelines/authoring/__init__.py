"""Declaring tables: one decorated function per table (docs/authoring.md).

import pipelines.authoring as tb

tb.landing("bronze.events", tb.files("events", "json", EVENTS))

@tb.silver(write=tb.dedupe("event_id", time="event_time"))
@tb.expect_or_quarantine("user_id_present", "user_id IS NOT NULL")
def events(bronze_events):
    return bronze_events.withColumn("event_date", F.to_date("event_time"))
"""

from pipelines.authoring.ddl import schema
from pipelines.authoring.decorators import (
    bronze,
    expect,
    expect_or_fail,
    expect_or_quarantine,
    files,
    flow,
    gold,
    kafka,
    landing,
    setting,
    silver,
    static,
    watermark,
)
from pipelines.authoring.kinds import append, cdc, dedupe, recompute, replace, upsert
from pipelines.authoring.sinks import jdbc_table, kafka_topic, sink, table_path
from pipelines.authoring.unit_tests import test
from pipelines.io.landing_values import rounded
from pipelines.sources.delta_changes import delta_changes
from pipelines.spec.expectations import (
    between,
    fresh,
    in_set,
    not_null,
    row_count,
    row_count_vs_upstream,
    totals_match_upstream,
    unique,
)
from pipelines.spec.rules import plausible_time

__all__ = [
    "append",
    "between",
    "bronze",
    "cdc",
    "dedupe",
    "delta_changes",
    "expect",
    "expect_or_fail",
    "expect_or_quarantine",
    "files",
    "flow",
    "fresh",
    "gold",
    "in_set",
    "jdbc_table",
    "kafka",
    "kafka_topic",
    "landing",
    "not_null",
    "plausible_time",
    "recompute",
    "replace",
    "rounded",
    "row_count",
    "row_count_vs_upstream",
    "schema",
    "setting",
    "silver",
    "sink",
    "static",
    "table_path",
    "test",
    "totals_match_upstream",
    "unique",
    "upsert",
    "watermark",
]
