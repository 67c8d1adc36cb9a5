"""Wrong declarations fail when the dataset is loaded, naming the file, line and function, and the fix."""

from __future__ import annotations

import itertools

import pytest

from infra.errors import ConfigError
from pipelines.authoring.load import load_registry
from tests.support.packages import write_package

_names = itertools.count()
HEAD = """
from pyspark.sql import functions as F
import pipelines.authoring as tb

tb.landing("bronze.{p}_raw", tb.files("{p}", "json", tb.schema("id string, at timestamp, n int")))
"""


def _load(tmp_path, body: str, files: dict[str, str] | None = None):
    package = f"authoring_case_{next(_names)}"
    text = HEAD.format(p=package) + body.replace("{p}", package)
    write_package(tmp_path, package, {"tables.py": text, **(files or {})})
    return package, load_registry([package])


def _fails(tmp_path, body: str, *expected: str, files: dict[str, str] | None = None):
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, body, files)
    message = str(caught.value)
    assert "\n" not in message
    for text in expected:
        assert text in message, message
    return message


def test_unknown_upstream_names_function_file_and_line(tmp_path):
    body = """

@tb.silver
def clean(bronze_{p}_missing):
    return bronze_{p}_missing
"""
    message = _fails(tmp_path, body, "tables.py:7, function clean", "bronze.", "_missing", "no dataset declares")
    assert "known tables" in message


def test_parameter_that_names_no_table(tmp_path):
    _fails(tmp_path, "\n@tb.silver\ndef clean(rows):\n    return rows\n", "tables.py:6", "'rows'", "<layer>_<table>")


def test_a_table_format_is_declared_per_table(tmp_path):
    body = "\n@tb.silver(format='delta')\ndef clean(bronze_{p}_raw):\n    return bronze_{p}_raw\n"
    package, registry = _load(tmp_path, body)
    assert registry.get("silver.clean").table_format == "delta"
    assert registry.get(f"bronze.{package}_raw").table_format is None  # the home's TRIBUTARY_TABLE_FORMAT
    wrong = "\n@tb.silver(format='parquet')\ndef clean(bronze_{p}_raw):\n    return bronze_{p}_raw\n"
    _fails(tmp_path, wrong, "function clean", "format='parquet'", "('iceberg', 'delta')")


def test_a_cycle_names_every_table_in_it(tmp_path):
    body = """

@tb.silver
def a_{p}(silver_b_{p}, bronze_{p}_raw=tb.static):
    return silver_b_{p}


@tb.silver
def b_{p}(silver_a_{p}):
    return silver_a_{p}
"""
    _fails(tmp_path, body, "cycle", "function a_authoring", "function b_authoring", "tables.py:7", "tables.py:12")


def test_two_functions_writing_one_table(tmp_path):
    body = """

@tb.silver(name="{p}")
def first(bronze_{p}_raw):
    return bronze_{p}_raw


@tb.silver(name="{p}")
def second(bronze_{p}_raw):
    return bronze_{p}_raw
"""
    _fails(tmp_path, body, "tables.py:12, function second", "also declared at", "tables.py:7, function first")


def test_a_declared_schema_is_a_contract(spark, tmp_path):
    body = """

@tb.silver(schema=tb.schema("id string, n bigint, _batch_id bigint"))
def typed(bronze_{p}_raw):
    return bronze_{p}_raw.select("id", "n")
"""
    _fails(tmp_path, body, "tables.py:7, function typed", "does not match", "n int", "n bigint")


def test_a_dedupe_key_that_is_not_a_column(spark, tmp_path):
    body = """

@tb.silver(write=tb.dedupe("order_id", time="at"))
def deduped(bronze_{p}_raw):
    return bronze_{p}_raw
"""
    _fails(tmp_path, body, "tables.py:7, function deduped", "order_id", "dedupe needs")


def test_a_dedupe_function_that_selects_loses_the_landed_record(spark, tmp_path):
    body = """

@tb.silver(write=tb.dedupe("id", time="_ingested_at"))
def selected(bronze_{p}_raw):
    lineage = ["_corrupt_record", "_rescued_data", "_file_rejected", "_source_file", "_ingested_at"]
    return bronze_{p}_raw.select("id", "n", *lineage)
"""
    _fails(tmp_path, body, "tables.py:7, function selected", "landed record", "withColumn rather than select")


def test_expectation_above_the_table_decorator(tmp_path):
    body = """

@tb.expect_or_quarantine("has_id", "id IS NOT NULL")
@tb.silver
def clean(bronze_{p}_raw):
    return bronze_{p}_raw
"""
    _fails(tmp_path, body, "function clean", "put the table decorator first")


@pytest.mark.parametrize(
    ("second", "expected"),
    [
        ('@tb.expect("positive", "n > 1")', "declares two row expectations named 'positive'"),
        ('@tb.expect("well_formed", "n > 1")', "'well_formed', the name of the platform's own rule on landed rows"),
    ],
)
def test_two_expectations_under_one_name(tmp_path, second, expected):
    body = f"""

@tb.silver(write=tb.dedupe("id", time="at"))
@tb.expect_or_quarantine("positive", "n > 0")
{second}
def clean(bronze_{{p}}_raw):
    return bronze_{{p}}_raw
"""
    _fails(tmp_path, body, "function clean", expected, "its own name")


def test_a_sql_table_reading_nothing(tmp_path):
    _fails(tmp_path, "", "empty.sql:1", "reads no table", files={"empty.sql": "-- keys: x\nSELECT 1 AS x\n"})


def test_inferred_schemas_follow_the_functions(spark, tmp_path):
    body = """

@tb.silver(write=tb.dedupe("id", time="at"))
@tb.expect_or_quarantine("positive", "n > 0")
def clean(bronze_{p}_raw):
    return bronze_{p}_raw.withColumn("doubled", F.col("n") * 2)
"""
    package, registry = _load(tmp_path, body)
    bronze = registry.get(f"bronze.{package}_raw")
    assert bronze.output.schema.names == [
        "id", "at", "n", "_corrupt_record", "_rescued_data", "_file_rejected", "_source_file", "_ingested_at",
        "_batch_id",
    ]  # fmt: skip
    assert bronze.output.partition_by == ("days(_ingested_at)",)
    silver = registry.get("silver.clean")
    assert [(f.name, f.dataType.simpleString()) for f in silver.output.schema.fields] == [
        ("id", "string"), ("at", "timestamp"), ("n", "int"), ("doubled", "int"), ("_source_file", "string"),
        ("_batch_id", "bigint"),
    ]  # fmt: skip
    quarantine = registry.get("silver.clean").extra_outputs[0]
    assert quarantine.name == "silver.clean_quarantine"
    assert quarantine.schema.names == ["id", "reasons", "raw_record", "_source_file", "_ingested_at", "_batch_id"]
    assert [r.name for r in silver.sink.rules] == [
        "well_formed",
        "file_rejected",
        "no_rescued_data",
        "id_present",  # the key's own rule: not NULL, not blank
        "positive",
    ]
    assert [e.label for e in silver.expectations][:3] == [
        "schema matches the spec",
        "id unique",
        f"row count <= 1.0x bronze.{package}_raw",
    ]


@pytest.mark.parametrize(
    "source,expected",
    [
        ('tb.kafka("bad topic!", schema=tb.schema("id string"))', "'bad topic!' is not a Kafka topic name"),
        ('tb.kafka("a", pattern="a.*", schema=tb.schema("id string"))', "names topics or a pattern (one of them)"),
        ('tb.kafka(pattern="(", schema=tb.schema("id string"))', "Kafka topic pattern '(' is invalid"),
        ('tb.kafka("a", schema=tb.schema("id string"), max_offsets_per_batch=0)', "max_offsets_per_batch=0 must be"),
        ('tb.kafka("a", schema=tb.schema("id string"), schema_evolution="add_new_columns")', "is not supported for"),
        ('tb.kafka("a", format="json")', "with format='json' needs schema="),
        ('tb.kafka("a", format="raw", options={"group.id": "g"})', "Kafka option 'group.id' is decided by Tributary"),
    ],
)
def test_a_wrong_kafka_source_names_its_place_and_the_fix(tmp_path, source, expected):
    body = f'\ntb.landing("bronze.{{p}}_stream", {source})\n'
    message = _fails(tmp_path, body, expected)
    assert "tables.py:" in message


def test_a_kafka_table_declares_its_lineage_and_a_raw_source_its_value(tmp_path):
    body = """
tb.landing("bronze.{p}_clicks", tb.kafka("clicks", format="raw"))
tb.landing("bronze.{p}_orders", tb.kafka(pattern="orders[.].*", schema=tb.schema("id string")))
"""
    package, registry = _load(tmp_path, body)
    clicks = registry.get(f"bronze.{package}_clicks")
    assert clicks.output.schema.names == [
        "value",
        "_corrupt_record",
        "_rescued_data",
        "_file_rejected",
        "_source_file",
        "_ingested_at",
        "_kafka_topic",
        "_kafka_partition",
        "_kafka_offset",
        "_kafka_timestamp",
        "_kafka_key",
        "_batch_id",
    ]
    assert clicks.files_table is None and clicks.output.partition_by == ("days(_ingested_at)",)
    checks = {(e.kind, tuple(e.columns)) for e in clicks.expectations if e.kind == "unique"}
    assert ("unique", ("_kafka_topic", "_kafka_partition", "_kafka_offset")) in checks
    assert registry.get(f"bronze.{package}_orders").source.dataset == "orders[.].*"


def test_a_dedupe_function_that_keeps_only_its_own_columns_gets_the_same_fix(spark, tmp_path):
    """Not Spark's unresolved `_corrupt_record`, which the landed-row rules would trip on first."""
    body = """

@tb.silver(write=tb.dedupe("id", time="at"))
def picked(bronze_{p}_raw):
    return bronze_{p}_raw.select("id", "n", "at")
"""
    message = _fails(tmp_path, body, "tables.py:7, function picked", "withColumn rather than select")
    assert "_corrupt_record" not in message


def test_every_problem_is_named_at_once_one_line_each(spark, tmp_path):
    body = """

@tb.silver
def unknown(bronze_{p}_missing):
    return bronze_{p}_missing


@tb.silver(write=tb.dedupe("order_id", time="at"))
def keyless(bronze_{p}_raw):
    return bronze_{p}_raw


@tb.gold
def behind(silver_keyless):
    return silver_keyless


@tb.silver
def fine(bronze_{p}_raw):
    return bronze_{p}_raw
"""
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, body)
    first, *lines = str(caught.value).splitlines()
    assert first == "2 problems in the datasets (one per line):"
    assert "tables.py:7, function unknown" in lines[0] and "no dataset declares" in lines[0]
    assert "tables.py:12, function keyless" in lines[1] and "dedupe needs" in lines[1]
    assert len(lines) == 2  # gold.behind reads the table at fault: not planned, not reported


def test_gold_tables_are_served_unless_declared_otherwise(tmp_path):
    body = """
@tb.gold
def totals(bronze_{p}_raw):
    return bronze_{p}_raw

@tb.gold(serve=False)
def hidden(bronze_{p}_raw):
    return bronze_{p}_raw

@tb.silver(serve=True)
def shown(bronze_{p}_raw):
    return bronze_{p}_raw
"""
    package, registry = _load(tmp_path, body)
    assert registry.get("gold.totals").serve and registry.get("silver.shown").serve
    assert not registry.get("gold.hidden").serve and not registry.get(f"bronze.{package}_raw").serve
    wrong = "\n@tb.gold(serve='yes')\ndef totals(bronze_{p}_raw):\n    return bronze_{p}_raw\n"
    _fails(tmp_path, wrong, "function totals", "serve='yes'", "True or False")
