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


COUNTS_SQL = """\
-- keys: name
-- refresh: recompute by name
-- sink: counts_to_kafka kafka item_counts
-- sink: counts_to_app postgres $SINK_TEST_DB app.item_counts
-- sink: counts_to_finance delta /data/finance/item_counts
SELECT name, count(*) AS items FROM bronze.items GROUP BY name
"""


def test_a_sql_tables_header_declares_its_sinks(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("TRIBUTARY_SINK_TEST_DB", "postgresql://app:secret@127.0.0.1:5432/app")
    files = {"tables.py": TABLES.split('tb.sink("items_out"')[0], "item_counts.sql": COUNTS_SQL}
    package = write_package(tmp_path / "packages", "sql_sinks", files)
    result = check_datasets([package])
    assert not result.problems, ([s.name for s in result.registry], result.problems)
    sinks = {s.name: s for s in result.registry.sinks}
    assert {n: (s.table, s.destination.describe(), s.destination.keys) for n, s in sinks.items()} == {
        "counts_to_kafka": ("gold.item_counts", "Kafka topic item_counts", ("name",)),
        "counts_to_app": ("gold.item_counts", "PostgreSQL table app.item_counts at 127.0.0.1:5432/app", ("name",)),
        "counts_to_finance": ("gold.item_counts", "Delta table at /data/finance/item_counts", ("name",)),
    }
    assert sinks["counts_to_app"].where.endswith("sql_sinks/item_counts.sql:4")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("counts_out mqtt x", "sink header 'counts_out mqtt x' is not '<name> <kind> <arguments>' with kind kafka"),
        ("counts_out kafka", "sink 'counts_out': 'kafka' takes <topic>, got nothing"),
        (
            "counts_out postgres postgresql://app:pw@db/app app.t",
            "sink 'counts_out': give the database URL as $<SETTING> (read from TRIBUTARY_<SETTING>), never in the file",
        ),
        ("counts_out postgres $NOT_SET_ANYWHERE app.t", "sink 'counts_out': TRIBUTARY_NOT_SET_ANYWHERE is not set"),
        ("counts_out delta relative/path", "sink 'counts_out': sink table path 'relative/path' must be absolute"),
    ],
)
def test_a_bad_sql_sink_header_is_one_line_naming_its_file_and_line(line, message, tmp_path):
    from pipelines.authoring.sql_tables import sql_declaration

    path = tmp_path / "counts.sql"
    path.write_text(f"-- keys: name\n-- sink: {line}\nSELECT name FROM bronze.items\n")
    with pytest.raises(DeclarationError) as refused:
        sql_declaration(path, "sql_sink_errors")
    assert str(refused.value).startswith(f"{path}:2: {message}"), str(refused.value)
