"""`tributary quarantine export`: the landed lines of quarantined rows come back byte for byte, per file, in order."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from infra.errors import ConfigError
from infra.settings import Settings
from orchestration.cli.main import main
from pipelines.authoring.load import load_registry
from pipelines.datasets import default_registry
from pipelines.ops.quarantine_lines import export_landed_lines
from pipelines.run.pipeline import run_pipeline
from tests.support.helpers import table
from tests.support.packages import write_package

QUARANTINE = "silver.events_quarantine"
CHAIN = ["bronze.events", "silver.events"]


def _event(event_id: str, rest: str) -> str:
    return f'{{"event_id":"{event_id}","event_type":"order","event_time":"2026-11-01T10:00:00Z",{rest}}}'


GOOD = _event("g-1", '"user_id":"u-1","quantity":1,"amount":10.50,"currency":"USD"')
# Rejected (an unknown currency, no user): bytes that Spark renders otherwise once read.
EXPONENT = _event("q-1", '"user_id":"u-1","quantity":2,"amount":1E2,"currency":"XXX"')
SAME_VALUES = _event("q-1", '"user_id":"u-1","quantity":2,"amount":100,"currency":"XXX"')  # other bytes, same row
NEGATIVE_ZERO = _event("q-2", '"user_id":"u-2","quantity":1,"amount":-0.0,"currency":"ZZZ"')
SPACED = '{ "event_id" : "q-3", "event_type" : "page_view", "event_time" : "2026-11-01T11:00:00.000Z" }'
TRUNCATED = '{"event_id":"q-4","event_type":"ord'


def _land(settings: Settings, name: str, lines: list[str], ending: str = "\n") -> Path:
    folder = settings.landing / "events"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes("".join(line + ending for line in lines).encode())
    return path


def test_exported_lines_are_the_landed_bytes_of_every_quarantined_row(
    spark: SparkSession, fresh_settings: Settings, tmp_path: Path
) -> None:
    s = fresh_settings
    _land(s, "a.json", [GOOD, EXPONENT, SPACED, SAME_VALUES, TRUNCATED], ending="\r\n")
    archived = _land(s, "b.json", [NEGATIVE_ZERO, GOOD.replace("g-1", "g-2")])
    gone = _land(s, "c.json", [_event("q-5", '"quantity":1,"amount":1,"currency":"USD"')])
    run_pipeline(spark, s, default_registry(), CHAIN)
    quarantined = table(spark, s, QUARANTINE).collect()
    assert len(quarantined) == 5  # both q-1 lines render alike: one record
    assert any('"amount":100.00' in r.raw_record for r in quarantined), "raw_record is Spark's rendering"
    # After the run the one file moves to the archive and the other is deleted.
    (s.home / "archive" / "events").mkdir(parents=True)
    shutil.move(archived, s.home / "archive" / "events" / archived.name)
    gone.unlink()

    out = tmp_path / "fix"
    done = export_landed_lines(spark, s, default_registry(), QUARANTINE, out)

    assert (out / "a.json").read_bytes() == f"{EXPONENT}\n{SPACED}\n{SAME_VALUES}\n{TRUNCATED}\n".encode()
    assert (out / "b.json").read_bytes() == f"{NEGATIVE_ZERO}\n".encode()
    assert sorted(p.name for p in out.iterdir()) == ["a.json", "b.json"]
    assert done.lines == {"a.json": 4, "b.json": 1}
    assert (done.records, done.not_found) == (5, 1)
    assert [Path(f).name for f in done.missing_files] == ["c.json"]


def test_export_by_rule_and_its_refusals(
    spark: SparkSession, fresh_settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    s = fresh_settings
    _land(s, "a.json", [GOOD, EXPONENT, SPACED, NEGATIVE_ZERO])
    run_pipeline(spark, s, default_registry(), CHAIN)

    monkeypatch.setenv("TRIBUTARY_CATALOG_NAME", s.catalog_name)
    for name in ("LANDING", "WAREHOUSE", "CHECKPOINTS", "CATALOG_DB", "CATALOG_URI"):
        monkeypatch.delenv(f"TRIBUTARY_{name}", raising=False)
    out = tmp_path / "priced"
    args = ["--home", str(s.home), "quarantine", "export", "silver.events", "--to", str(out)]
    assert main([*args, "--reason", "order_is_priced"]) == 0
    assert (out / "a.json").read_bytes() == f"{EXPONENT}\n{NEGATIVE_ZERO}\n".encode()
    printed = capsys.readouterr().out
    assert f"{QUARANTINE}: 2 landed lines of 2 quarantined records that failed order_is_priced, in 1 files" in printed

    with pytest.raises(ConfigError, match="is not empty: choose a new or empty folder"):
        export_landed_lines(spark, s, default_registry(), QUARANTINE, out)
    with pytest.raises(ConfigError, match="is the landing folder of events: export to another folder"):
        export_landed_lines(spark, s, default_registry(), QUARANTINE, s.landing / "events")
    with pytest.raises(ConfigError, match=r"silver\.events is not a quarantine table; the quarantine tables are: "):
        export_landed_lines(spark, s, default_registry(), "silver.events", tmp_path / "x")
    assert main(["--home", str(s.home), "quarantine", "export", "gold.daily_revenue", "--to", str(tmp_path / "y")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tributary: error: gold.daily_revenue is not a quarantine table"), err
    assert len(err.splitlines()) == 1


CSV_TABLES = """
import pipelines.authoring as tb

ROW = tb.schema("id string, qty int, price decimal(8,2), at timestamp")
tb.landing("bronze.stock", tb.files("stock", "csv", ROW))


@tb.silver(write=tb.dedupe("id", time="at"))
@tb.expect_or_quarantine("positive", "qty > 0")
def stock(bronze_stock):
    return bronze_stock
"""


def test_csv_lines_come_back_with_their_header_left_out(spark: SparkSession, fresh_settings: Settings, tmp_path: Path):
    s = fresh_settings
    registry = load_registry([write_package(tmp_path / "packages", "quarantined_csv", {"tables.py": CSV_TABLES})])
    folder = s.landing / "stock"
    folder.mkdir(parents=True)
    # Columns in another order than declared (matched by header), a zero written two ways, a bad number.
    good = [f"2026-11-01T10:00:00Z,1.50,g-{i},3" for i in range(12)]  # enough for the file to be accepted
    bad = ["2026-11-01 10:00:00,1E1,s-2,0", "2026-11-01T10:00:00Z, 2.00 ,s-3,-0", "2026-11-01T10:00:00Z,abc,s-4,2"]
    rows = ["at,price,id,qty", good[0], *bad, *good[1:]]
    (folder / "a.csv").write_bytes("".join(r + "\n" for r in rows).encode())
    run_pipeline(spark, s, registry)
    got = table(spark, s, "silver.stock_quarantine").collect()
    assert len(got) == 3, [(r.raw_record, r.reasons) for r in got]

    done = export_landed_lines(spark, s, registry, "silver.stock_quarantine", tmp_path / "fix")
    assert (tmp_path / "fix" / "a.csv").read_bytes() == "".join(r + "\n" for r in bad).encode()
    assert (done.records, done.not_found, done.lines) == (3, 0, {"a.csv": 3})
