"""`tributary sql` on a Delta home: DuckDB over delta-rs answers as it does over the same tables in Iceberg, time
travel goes by version, and Spark SQL refuses with one line naming the way that works."""

from __future__ import annotations

from dataclasses import replace

import pytest

from infra.errors import ConfigError
from infra.spark import get_spark
from infra.sql import server
from infra.sql.catalog import history
from infra.sql.local import LocalEngine, settings_env
from infra.sql.spark_engine import spark_query
from orchestration.cli.main import main
from pipelines.datasets import default_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io.formats import table_format
from pipelines.run.pipeline import run_pipeline
from tests.infra.sql.test_sql_local import GOLD, PARITY_QUERIES
from tests.support.homes import make_settings


@pytest.fixture(scope="module")
def homes(spark, tmp_path_factory):
    """The same two landings run into an Iceberg home and a Delta home; gold's rows after the first run."""
    iceberg = make_settings(tmp_path_factory.mktemp("sql-iceberg"))
    delta = replace(make_settings(tmp_path_factory.mktemp("sql-delta")), table_format="delta")
    assert get_spark(iceberg) is spark and get_spark(delta) is spark  # registers each home's catalog
    first = {}
    for seed in (11, 12):
        for s in (iceberg, delta):
            generate(s.landing, rows=1500, files=2, seed=seed)
            run_pipeline(spark, s, default_registry(), ["bronze.events", "silver.events", GOLD, "gold.event_counts_5m"])
        if seed == 11:
            first = {
                "version": table_format(delta).current_snapshot(spark, GOLD).snapshot_id,
                "rows": LocalEngine(delta).query(f"SELECT * FROM {GOLD} ORDER BY ALL").rows,
            }
    return iceberg, delta, first


@pytest.mark.parametrize("name", sorted(PARITY_QUERIES))
def test_delta_answers_as_iceberg_does(homes, name):
    iceberg, delta, _ = homes
    on_delta = LocalEngine(delta).query(PARITY_QUERIES[name]).rows
    assert on_delta, f"{name}: no rows, the comparison would prove nothing"
    assert on_delta == LocalEngine(iceberg).query(PARITY_QUERIES[name]).rows


def test_time_travel_history_and_tables_on_delta(homes):
    _, delta, first = homes
    engine = LocalEngine(delta, as_of=str(first["version"]))
    assert engine.query(f"SELECT * FROM {GOLD} ORDER BY ALL").rows == first["rows"]
    assert LocalEngine(delta).query(f"SELECT * FROM {GOLD} ORDER BY ALL").rows != first["rows"]

    versions = history(delta, "bronze.events")
    ops = [dict(zip(versions.columns, row, strict=True)) for row in versions.rows]
    assert [o["operation"] for o in ops] == ["create", "append", "append"]
    assert [o["snapshot_id"] for o in ops] == [0, 1, 2]
    assert ops[-1]["current"] and ops[-1]["total_records"] == 3000
    assert sum(int(o["added_records"]) for o in ops) == 3000

    tables = dict((row[0], row[1]) for row in LocalEngine(delta).query("SHOW TABLES").rows)
    assert tables["bronze.events"] == 3000 and GOLD in tables
    with pytest.raises(ConfigError, match="query Delta tables with 'tributary sql'"):
        spark_query(delta, f"SELECT * FROM {GOLD}")
    with pytest.raises(ConfigError, match="TRIBUTARY_TABLE_FORMAT=delta"):
        server.start(delta)  # refused before anything starts


def test_tributary_query_refuses_a_delta_home(homes, capsys, monkeypatch):
    _, delta, _ = homes
    for key, value in settings_env(delta).items():
        monkeypatch.setenv(key, value)
    assert main(["query", f"SELECT * FROM {GOLD}"]) == 2
    err = capsys.readouterr().err
    assert "query Delta tables with 'tributary sql'" in err and "Traceback" not in err
