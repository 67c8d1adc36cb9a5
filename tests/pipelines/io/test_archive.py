"""`FileSource(archive=True)`: ingested files leave the landing folder, are never read again and never lost."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from infra.errors import ConfigError, PipelineError
from infra.settings import Settings
from pipelines.io.archive import archive_committed, archive_folder
from pipelines.io.sources import landed_files
from pipelines.ops.full_refresh import full_refresh
from pipelines.ops.reprocess import reprocess
from pipelines.run.runner import run_table
from pipelines.spec.registry import Registry
from pipelines.spec.sources import FileSource
from quality.reconcile import Pipeline, reconcile_pipeline
from tests.support.helpers import table
from tests.support.landing_registry import orders_registry

DATASET = "orders_archived"
BRONZE, SILVER = f"bronze.{DATASET}", f"silver.{DATASET}"


def _registry() -> Registry:
    """The orders dataset with archiving, bronze partitioned by ingestion day (so it can be reprocessed)."""
    bronze, silver = orders_registry(DATASET, "json", archive=True)
    by_day = replace(bronze.output, partition_by=("days(_ingested_at)",))
    return Registry([replace(bronze, output=by_day), silver])


def _order(order_id: str) -> str:
    return json.dumps(
        {"order_id": order_id, "quantity": 1, "price": 2.5, "ordered_at": "2026-01-03T10:00:00Z", "customer": "c"}
    )


def _land(settings: Settings, name: str, lines: list[str]) -> Path:
    folder = settings.landing / DATASET
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}"
    tmp.write_text("".join(f"{line}\n" for line in lines))
    return tmp.rename(folder / name)


def _run(spark: SparkSession, settings: Settings, registry: Registry) -> dict[str, int]:
    reports = [run_table(spark, settings, spec) for spec in registry]
    return reports[0].metrics


def _per_file(spark: SparkSession, settings: Settings) -> dict[str, int]:
    rows = table(spark, settings, BRONZE).groupBy("_source_file").count().collect()
    return {r["_source_file"]: r["count"] for r in rows}


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def _reconciled(spark: SparkSession, settings: Settings, registry: Registry) -> None:
    bronze, silver = list(registry)
    result = reconcile_pipeline(spark, settings, Pipeline(bronze, silver))
    assert not result.failed, [o.summary() for o in result.failed]


def test_archived_files_are_never_read_again_nor_lost(spark: SparkSession, fresh_settings: Settings) -> None:
    s, registry = fresh_settings, _registry()
    source = registry.get(BRONZE).source
    assert isinstance(source, FileSource)
    landing, archive = s.landing / DATASET, archive_folder(s, source)
    _land(s, "a.json", [_order("a1"), _order("a2"), _order("a3")])
    _land(s, "b.json", [_order("b1"), "not json", _order("b2")])

    assert _run(spark, s, registry)["files_archived"] == 2
    assert _names(landing) == [] and _names(archive) == ["a.json", "b.json"]
    first = _per_file(spark, s)
    assert sorted(first.values()) == [3, 3]
    # Rows keep the landing path they were read from; reconciliation counts the archived files' lines.
    assert all(f"/landing/{DATASET}/" in name for name in first)
    _reconciled(spark, s, registry)

    # A new file is read alone; an archived file is never listed again.
    _land(s, "c.json", [_order("c1")])
    assert _run(spark, s, registry)["files_archived"] == 1
    per_file = _per_file(spark, s)
    assert {k: v for k, v in per_file.items() if k in first} == first
    assert sum(per_file.values()) == 7 and _names(archive) == ["a.json", "b.json", "c.json"]
    assert table(spark, s, SILVER).count() == 6
    _reconciled(spark, s, registry)

    # The same bytes landed again under an archived name: read once already, so removed and not read again.
    _land(s, "a.json", [_order("a1"), _order("a2"), _order("a3")])
    _run(spark, s, registry)
    assert _names(landing) == [] and sum(_per_file(spark, s).values()) == 7

    # A batch that was planned but never committed keeps its file in the landing folder until it is.
    _land(s, "d.json", [_order("d1"), _order("d2")])

    def boom(df: DataFrame) -> DataFrame:
        raise RuntimeError("injected fault in the batch write")

    with pytest.raises(PipelineError):
        run_table(spark, s, replace(registry.get(BRONZE), transform=boom))
    checkpoint = s.checkpoint_for(BRONZE)
    assert archive_committed(s, source, checkpoint, landed_files(s, source)) == 0
    assert _names(landing) == ["d.json"]
    assert _run(spark, s, registry)["files_archived"] == 1
    assert sum(_per_file(spark, s).values()) == 9 and _names(landing) == []
    _reconciled(spark, s, registry)

    # A reprocess re-reads archived files, keeping each row's landing path.
    before = sorted(map(repr, table(spark, s, BRONZE).drop("_ingested_at").collect()))
    today = datetime.now(UTC).date()
    report = reprocess(spark, s, registry, BRONZE, today, today)
    assert report.extra["files_reread"] == 4
    assert sorted(map(repr, table(spark, s, BRONZE).drop("_ingested_at").collect())) == before

    # A full refresh brings the archived files back, reads each once, and archives them again.
    full_refresh(spark, s, registry, BRONZE, confirm=BRONZE)
    assert sum(_per_file(spark, s).values()) == 9
    assert table(spark, s, SILVER).count() == 8
    assert _names(landing) == [] and _names(archive) == ["a.json", "b.json", "c.json", "d.json"]
    assert table(spark, s, BRONZE).filter(F.col("_source_file").contains("/archive/")).count() == 0
    _reconciled(spark, s, registry)


def test_an_archived_folder_read_by_two_tables_is_refused() -> None:
    archived = list(orders_registry(DATASET, "json", archive=True))
    other = next(iter(orders_registry(DATASET, "csv")))
    other = replace(other, output=replace(other.output, name="bronze.orders_again"))
    with pytest.raises(ConfigError, match=f"archives landing folder '{DATASET}', which .* both read"):
        Registry([*archived, other])
