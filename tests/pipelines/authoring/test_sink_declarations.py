"""Declaring sinks: a bad destination or a sink on a table no dataset declares is one line naming its place."""

from __future__ import annotations

import pytest

import pipelines.authoring as tb
from pipelines.authoring.declarations import DeclarationError
from pipelines.authoring.load import check_datasets
from pipelines.deliver.jdbc_table import JdbcTable
from tests.support.packages import write_package

TABLES = """
import pipelines.authoring as tb

tb.landing("bronze.items", tb.files("items", "json", tb.schema("item_id BIGINT, name STRING")))
tb.sink("items_out", "bronze.items", to=tb.kafka_topic("items"))
tb.sink("items_by_key", "bronze.items", to=tb.kafka_topic("items_keyed", keys="item_id"))
tb.sink("nowhere", "silver.missing", to=tb.kafka_topic("missing"))
tb.sink("bad_key", "bronze.items", to=tb.kafka_topic("bad", keys="no_such_column"))
tb.sink("items_out", "bronze.items", to=tb.kafka_topic("again"))
"""


def test_bad_destinations_are_refused_where_they_are_declared():
    with pytest.raises(DeclarationError, match=r"^tests/pipelines/authoring/test_sink_declarations\.py:\d+: a sink's"):
        tb.jdbc_table("mysql://app@127.0.0.1/app", "app.items")
    with pytest.raises(DeclarationError, match=r"is not \[schema\.\]table"):
        tb.jdbc_table("postgresql://app@127.0.0.1/app", "App.Items")
    with pytest.raises(DeclarationError, match=r"the sink's database URL is empty"):
        tb.jdbc_table("", "app.items")
    with pytest.raises(DeclarationError, match=r"'orders!' is not a Kafka topic name"):
        tb.kafka_topic("orders!")
    secret = JdbcTable("jdbc:postgresql://db.internal:6543/app?user=u&password=hunter2", "items")
    assert "hunter2" not in repr(secret) and "hunter2" not in secret.describe()
    assert secret.describe() == "PostgreSQL table public.items at db.internal:6543/app"


def test_sinks_are_checked_against_the_tables_one_line_each(spark, tmp_path):
    package = write_package(tmp_path / "packages", "sink_declarations", {"tables.py": TABLES})
    result = check_datasets([package])
    assert [s.name for s in result.registry.sinks] == ["items_out", "items_by_key"]
    assert [s.destination.keys for s in result.registry.sinks] == [(), ("item_id",)]
    where = "packages/sink_declarations/tables.py"
    problems = [p.split(": ", 1) for p in result.problems]
    assert [(place.rsplit(":", 1)[0].endswith(where), text) for place, text in problems] == [
        (True, "sink 'nowhere' follows 'silver.missing', which no dataset declares"),
        (
            True,
            "sink 'bad_key': key 'no_such_column' is not a column of bronze.items (its columns: _batch_id, "
            "_corrupt_record, _file_rejected, _ingested_at, _rescued_data, _source_file, item_id, name)",
        ),
        (True, "sink 'items_out' is declared twice"),
    ]
