"""Rejected landed files: named by the run, listed, blocking until acknowledged (`tributary files ack`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dagster import AssetCheckSeverity, AssetKey, DagsterInstance, asset, materialize
from pyspark.sql import SparkSession
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from infra.settings import Settings
from orchestration.assets import build_table_asset
from orchestration.checks import LANDED_FILES, LANDED_FILES_WARN, build_landed_files_checks, landed_files_results
from orchestration.cli.main import main
from orchestration.cli.summary import numbers_lines, report_lines
from orchestration.resources import SparkResource
from pipelines import datasets
from pipelines.io.landing_parse import LANDED_LINEAGE
from pipelines.ops.file_review import FileReviewError, acknowledge, file_rows, unresolved
from pipelines.run.runner import run_table
from pipelines.run.summary import FILE_PROBLEMS_KEY, NOTE_KEY, table_notes, table_numbers
from pipelines.spec.registry import Registry
from pipelines.spec.sources import FileSource
from pipelines.spec.tables import OutputTable, TableSpec
from pipelines.write.sinks import AppendSink
from tests.support.helpers import table

TABLE = "bronze.orders"
FILES_TABLE = "bronze.orders_files"
FIELDS = [StructField("order_id", StringType()), StructField("quantity", IntegerType())]
GOOD = [json.dumps({"order_id": "o1", "quantity": 1}), json.dumps({"order_id": "o2", "quantity": 2})]
# One order and three lines that are not JSON: 75% corrupt, over the default reject_file_ratio of 0.5.
BAD = [json.dumps({"order_id": "o3", "quantity": 3}), "not json", "{broken", "<html>"]


def _registry() -> Registry:
    output = OutputTable(TABLE, StructType([*FIELDS, *LANDED_LINEAGE, StructField("_batch_id", LongType())]))
    spec = TableSpec(
        output=output,
        layer="bronze",
        description="orders as landed",
        source=FileSource("orders", "json", StructType(FIELDS)),
        transform=lambda df: df,
        sink=AppendSink(batch_id_column="_batch_id"),
    )
    return Registry([spec])


def _land(settings: Settings, name: str, lines: list[str]) -> Path:
    """Write a landing file atomically (a dot-file renamed into place, as producers do)."""
    folder = settings.landing / "orders"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}"
    tmp.write_text("".join(f"{line}\n" for line in lines))
    return tmp.rename(folder / name)


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, fresh_settings: Settings) -> Registry:
    """Make `main(['--home', ...])` use the test's catalog and the tiny registry; return that registry."""
    registry = _registry()
    monkeypatch.setenv("TRIBUTARY_CATALOG_NAME", fresh_settings.catalog_name)
    for name in ("LANDING", "WAREHOUSE", "CHECKPOINTS", "CATALOG_DB", "CATALOG_URI"):
        monkeypatch.delenv(f"TRIBUTARY_{name}", raising=False)
    monkeypatch.setattr(datasets, "default_registry", lambda: registry)
    return registry


def _cli(settings: Settings, *args: str) -> int:
    return main(["--home", str(settings.home), *args])


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_rejected_file_is_named_listed_and_cleared_by_ack(
    spark: SparkSession, fresh_settings: Settings, cli: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    s = fresh_settings
    spec = cli.get(TABLE)
    _land(s, "good.json", GOOD)
    bad = _land(s, "bad.json", BAD)
    _land(s, "empty.json", [])

    report = run_table(spark, s, spec)
    assert {Path(h.file).name: h.status for h in report.files} == {
        "good.json": "ok",
        "bad.json": "rejected",
        "empty.json": "empty",
    }
    rejected = next(h for h in report.files if h.status == "rejected")
    assert (rejected.rows, rejected.corrupt_rows) == (4, 3)
    problems = report.file_problems()
    assert len(problems) == 2
    assert any("bad.json was rejected" in p and f"tributary files ack {TABLE} bad.json" in p for p in problems)
    assert any("empty.json is empty" in p for p in problems)
    assert report_lines([report]) == problems
    numbers = table_numbers(report, TABLE)
    assert {k: numbers[k] for k in ("files_read", "files_rejected", "files_empty", "files_header_only")} == {
        "files_read": 3,
        "files_rejected": 1,
        "files_empty": 1,
        "files_header_only": 0,
    }
    assert (numbers["rows_corrupt"], numbers["rows_rescued"]) == (3, 0)
    assert "files_read" not in table_numbers(report, FILES_TABLE)  # counts belong to the main table only
    assert table_notes(report, TABLE)[FILE_PROBLEMS_KEY].count("\n- ") == 1

    pending = unresolved(spark, s, spec)
    assert [(r.name, r.file, r.rows, r.corrupt_rows) for r in pending] == [("bad.json", str(bad), 4, 3)]
    assert pending[0].reason is not None and "3 of 4 rows are corrupt" in pending[0].reason
    assert [(r.name, r.status) for r in file_rows(spark, s, spec, problems_only=True)] == [
        ("bad.json", "rejected"),
        ("empty.json", "empty"),
    ]

    # A second rejected file, through `tributary run`: the summary names it and the command that clears it.
    _land(s, "bad2.json", ["garbage", "more garbage"])
    assert _cli(s, "run", TABLE) == 0
    out = capsys.readouterr().out
    assert f"{TABLE}: landing file {s.landing / 'orders' / 'bad2.json'} was rejected" in out
    assert f"tributary files ack {TABLE} bad2.json" in out
    assert "bad.json was rejected" not in out  # only what this run read
    assert [r.name for r in unresolved(spark, s, spec)] == ["bad.json", "bad2.json"]

    assert _cli(s, "files", "list", TABLE, "--problems") == 0
    listing = capsys.readouterr().out
    assert "3 problem files (2 rejected, 1 empty; 2 unresolved)" in listing
    bad_line = next(line for line in listing.splitlines() if " bad.json " in line)
    assert bad_line.split()[:5] == ["rejected", "UNRESOLVED", "4", "3", "0"]
    assert "good.json" not in listing
    assert f"then run 'tributary files ack {TABLE} bad2.json'" in listing

    # Refusals: one line each, exit 2, naming the files that do need an acknowledgement.
    assert _cli(s, "files", "ack", TABLE, "good.json") == 2
    err = _error_line(capsys)
    assert "good.json was not rejected (status ok)" in err and "bad.json, bad2.json" in err
    assert _cli(s, "files", "ack", TABLE, "nope.json") == 2
    assert "no landed file named nope.json" in _error_line(capsys)
    assert _cli(s, "files", "ack", "bronze.nope", "bad.json") == 2
    assert "no table 'bronze.nope'" in _error_line(capsys)

    # Acknowledged by full path (with a note) and by name: appended rows, nothing rewritten.
    assert _cli(s, "files", "ack", TABLE, str(bad), "--note", "fixed copy landed as bad-fixed.json") == 0
    assert "still unresolved: bad2.json" in capsys.readouterr().out
    assert [r.name for r in unresolved(spark, s, spec)] == ["bad2.json"]
    assert _cli(s, "files", "ack", TABLE, "bad2.json") == 0
    assert "no unresolved rejected files" in capsys.readouterr().out
    assert unresolved(spark, s, spec) == []

    acks = table(spark, s, FILES_TABLE).filter("status = 'acknowledged'").orderBy("recorded_at").collect()
    assert [(Path(r.file).name, r._batch_id, r.rows) for r in acks] == [
        ("bad.json", None, None),
        ("bad2.json", None, None),
    ]
    assert acks[0].reason.startswith("acknowledged by ") and acks[0].reason.endswith(
        ": fixed copy landed as bad-fixed.json"
    )
    assert table(spark, s, FILES_TABLE).count() == 6  # 4 landed files + 2 acknowledgements

    assert _cli(s, "files", "ack", TABLE, "bad.json") == 2
    err = _error_line(capsys)
    assert "bad.json is already acknowledged (acknowledged by " in err and "no unresolved rejected files" in err
    with pytest.raises(FileReviewError, match="already acknowledged"):
        acknowledge(spark, s, spec, "bad2.json", None, "tester")
    listed = {r.name: r for r in file_rows(spark, s, spec)}
    assert listed["bad.json"].status == "rejected" and listed["bad.json"].acknowledgement is not None
    assert listed["good.json"].status == "ok" and not listed["good.json"].unresolved


def test_files_commands_refuse_tables_without_landed_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Bad input fails before Spark starts: one line, exit 2, naming the tables that read landed files."""
    assert main(["--home", str(tmp_path), "files", "ack", "silver.events", "x.json"]) == 2
    err = _error_line(capsys)
    assert "table silver.events does not read landed files" in err and "bronze.events" in err
    assert main(["--home", str(tmp_path), "files", "list", "gold.daily_revenue"]) == 2
    assert "does not read landed files" in _error_line(capsys)


def test_landed_files_check_blocks_until_acknowledged(spark: SparkSession, fresh_settings: Settings) -> None:
    s = fresh_settings
    spec = _registry().get(TABLE)
    checks = build_landed_files_checks(spec)
    assert {c.name: c.blocking for c in checks.check_specs} == {LANDED_FILES: True, LANDED_FILES_WARN: False}

    # Before anything landed: the run says why it did nothing, and both checks pass.
    report = run_table(spark, s, spec)
    assert report.note is not None and report.note.startswith("nothing has landed yet")
    assert table_notes(report, TABLE) == {NOTE_KEY: report.note}
    assert table_numbers(report, TABLE)["files_read"] == 0
    assert [(r.check_name, r.passed) for r in landed_files_results(spark, s, spec)] == [
        (LANDED_FILES, True),
        (LANDED_FILES_WARN, True),
    ]

    _land(s, "good.json", GOOD)
    _land(s, "bad.json", BAD)
    _land(s, "empty.json", [])
    resources = {"spark": SparkResource(home=str(s.home), catalog_name=s.catalog_name)}
    key = AssetKey(["bronze", "orders"])

    @asset(deps=[key])
    def downstream() -> None:
        """Stands for silver: it must not build on a table holding an unresolved rejected file."""

    assets = [build_table_asset(spec), checks, downstream]
    with DagsterInstance.ephemeral() as instance:
        first = materialize(assets, instance=instance, resources=resources, raise_on_error=False)
        assert not first.success
        meta = {
            ".".join(e.asset_key.path): e.event_specific_data.materialization.metadata
            for e in first.get_asset_materialization_events()
        }
        assert set(meta) == {TABLE, FILES_TABLE}  # the blocking check kept `downstream` from running
        assert meta[TABLE]["files_rejected"].value == 1 and meta[TABLE]["files_read"].value == 3
        assert "bad.json was rejected" in meta[TABLE][FILE_PROBLEMS_KEY].value
        recorded = {name: {k: v.value for k, v in m.items()} for name, m in meta.items()}
        shown = numbers_lines(recorded)  # what `tributary demo` prints after its numbers
        assert len(shown) == 2 and "bad.json was rejected" in shown[0] and "empty.json is empty" in shown[1]
        evaluations = {e.check_name: e for e in first.get_asset_check_evaluations()}
        rejected = evaluations[LANDED_FILES]
        assert rejected.asset_key == key and not rejected.passed
        assert rejected.severity == AssetCheckSeverity.ERROR
        assert rejected.metadata["unresolved_files"].value == 1
        assert rejected.metadata["ack_commands"].value == f"tributary files ack {TABLE} bad.json"
        assert "bad.json" in rejected.description and "3 of 4 rows are corrupt" in rejected.description
        warned = evaluations[LANDED_FILES_WARN]
        assert not warned.passed and warned.severity == AssetCheckSeverity.WARN
        assert warned.metadata["files_empty"].value == 1 and "empty.json" in warned.description

        acknowledge(spark, s, spec, "bad.json", "sender re-sent it", "tester")
        second = materialize(assets, instance=instance, resources=resources, raise_on_error=False)
        assert second.success
        assert {".".join(e.asset_key.path) for e in second.get_asset_materialization_events()} == {
            TABLE,
            FILES_TABLE,
            "downstream",
        }
        evaluations = {e.check_name: e for e in second.get_asset_check_evaluations()}
        assert evaluations[LANDED_FILES].passed
        assert evaluations[LANDED_FILES].metadata["acknowledged_files"].value == 1
        assert not evaluations[LANDED_FILES_WARN].passed  # empty files stay named: they are facts about the table
