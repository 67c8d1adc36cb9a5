"""`migrate_catalog` without Spark: tables made with pyiceberg in a home's SQLite catalog move into another catalog
database (the cluster case, into PostgreSQL with a real run after it, is in tests/e2e/test_cluster.py)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from infra.catalog import catalog_at, pyiceberg_catalog
from infra.errors import ConfigError
from infra.home_record import recorded
from pipelines.ops.migrate import migrate_catalog
from tests.support.homes import make_settings


def test_a_conflicting_table_stops_the_migration_and_the_home_stays(tmp_path):
    settings = make_settings(tmp_path / "home")
    source = pyiceberg_catalog(settings)
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
    for name in ("bronze.a", "silver.b"):
        source.create_namespace_if_not_exists(name.split(".")[0])
        source.create_table(name, rows.schema).append(rows)
    other = tmp_path / "other.db"
    into = catalog_at(settings, f"sqlite:///{other}")
    into.create_namespace_if_not_exists("silver")
    into.create_table("silver.b", rows.schema)  # another table of the same name, not this home's

    with pytest.raises(ConfigError) as stopped:
        migrate_catalog(settings, f"jdbc:sqlite:{other}")
    assert str(stopped.value).startswith(f"table silver.b already exists in catalog sqlite:{other} ")
    assert "drop it there, or migrate under another TRIBUTARY_CATALOG_NAME" in str(stopped.value)
    assert recorded(settings.home)["catalog"] == "sqlite:catalog.db"  # the home did not move

    into.drop_table("silver.b")
    migration = migrate_catalog(settings, f"jdbc:sqlite:{other}")
    assert migration.registered == ("silver.b",) and migration.already_there == ("bronze.a",)
    assert recorded(settings.home)["catalog"] == f"sqlite:{other}"
    for name in ("bronze.a", "silver.b"):
        moved = into.load_table(name)
        assert moved.metadata_location == source.load_table(name).metadata_location
        assert moved.scan().to_arrow().column("id").to_pylist() == [1, 2, 3]
    with pytest.raises(ConfigError, match="already uses catalog"):
        migrate_catalog(settings, f"jdbc:sqlite:{other}")
