"""A home records its table format and catalog: commands default to its format, and a run against another catalog
refuses with one line instead of writing empty tables."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime

import pytest

from infra.errors import ConfigError
from infra.home_record import RECORD, catalog_identity, check_home, first_day, note_first_day, recorded
from infra.settings import Settings
from orchestration.partitions import daily_partitions
from pipelines.datasets import demo_registry
from pipelines.run.runner import run_table

PG = "jdbc:postgresql://127.0.0.1:5544/tributary?user=tb&password=s3cret"


def test_catalog_identity_is_stable_and_has_no_secrets(tmp_path):
    home = tmp_path / "home"
    assert catalog_identity(home, None, home / "catalog.db") == "sqlite:catalog.db"
    assert catalog_identity(home, f"jdbc:sqlite:{tmp_path}/c.db", home / "x") == f"sqlite:{tmp_path}/c.db"
    assert catalog_identity(home, PG, home / "catalog.db") == "jdbc:postgresql://127.0.0.1:5544/tributary"
    assert catalog_identity(home, "jdbc:postgresql://tb:pw@db:5432/cat", home) == "jdbc:postgresql://db:5432/cat"


def test_a_home_keeps_its_catalog_and_lends_its_format(tmp_path, monkeypatch):
    home = tmp_path / "home"
    check_home(home, "delta", "sqlite:catalog.db")
    assert recorded(home) == {"table_format": "delta", "catalog": "sqlite:catalog.db"}
    check_home(home, "iceberg", "sqlite:catalog.db")  # the same catalog: fine, and the record stays
    assert recorded(home)["table_format"] == "delta"
    with pytest.raises(ConfigError) as refused:
        check_home(home, "delta", catalog_identity(home, PG, home / "catalog.db"))
    message = str(refused.value)
    assert "catalog sqlite:catalog.db" in message and "jdbc:postgresql://127.0.0.1:5544/tributary" in message
    assert "use a new TRIBUTARY_HOME" in message and "s3cret" not in message

    monkeypatch.delenv("TRIBUTARY_TABLE_FORMAT", raising=False)
    assert Settings.from_env(home=home).table_format == "delta"  # the home's own format
    assert Settings.from_env(home=tmp_path / "new").table_format == "iceberg"
    monkeypatch.setenv("TRIBUTARY_TABLE_FORMAT", "iceberg")
    assert Settings.from_env(home=home).table_format == "iceberg"  # the setting, when given, wins


def test_the_first_data_day_only_moves_earlier_and_starts_the_daily_partitions(tmp_path, monkeypatch):
    monkeypatch.delenv("TRIBUTARY_PARTITIONS_START", raising=False)
    settings = Settings.from_env(home=tmp_path / "home")
    today = datetime.now(UTC).date()
    assert daily_partitions(settings).get_first_partition_key() == today.isoformat()  # no data: today only
    check_home(settings.home, "iceberg", "sqlite:catalog.db")
    note_first_day(settings.home, date(2026, 11, 3))
    note_first_day(settings.home, date(2026, 11, 9))  # later: the first day stays
    assert first_day(settings.home) == date(2026, 11, 3)
    assert recorded(settings.home)["catalog"] == "sqlite:catalog.db"  # the rest of the record is kept
    assert daily_partitions(settings).get_first_partition_key() == "2026-11-03"
    note_first_day(settings.home, date(2026, 10, 30))
    assert daily_partitions(settings).get_first_partition_key() == "2026-10-30"
    monkeypatch.setenv("TRIBUTARY_PARTITIONS_START", "2026-06-01")  # the setting wins
    assert daily_partitions(Settings.from_env(home=settings.home)).get_first_partition_key() == "2026-06-01"


def test_a_run_against_another_catalog_refuses_before_writing(tmp_path, monkeypatch):
    monkeypatch.delenv("TRIBUTARY_CATALOG_URI", raising=False)
    settings = Settings.from_env(home=tmp_path / "home")
    check_home(settings.home, "iceberg", "sqlite:catalog.db")
    moved = replace(settings, catalog_uri=PG)
    with pytest.raises(ConfigError, match=r"holds the checkpoints of tables in catalog sqlite:catalog\.db"):
        run_table(None, moved, demo_registry().get("bronze.events"))
    assert sorted(p.name for p in settings.home.iterdir()) == [RECORD]
