"""Each input of a join declares its own event-time column and delay: no renames, the same rows as plain Spark.

Impressions (`shown_at`, 10 minutes late at most) and clicks (`clicked_at`, 2 minutes) are joined when a click
comes within 5 minutes of its impression. Two drops land; the second brings clicks and impressions behind the
watermark. Plain Spark runs the same function on the same files with the same two watermarks, one availableNow
step per drop, and both must hold the same joined rows.
"""

from __future__ import annotations

import importlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from infra.errors import ConfigError
from pipelines.authoring.declarations import DeclarationError
from pipelines.authoring.load import load_registry
from pipelines.run.pipeline import run_pipeline
from tests.support.helpers import table
from tests.support.homes import make_settings
from tests.support.packages import write_package

IMPRESSION = "impression_id string, user_id string, shown_at timestamp"
CLICK = "click_id string, impression_id string, clicked_at timestamp"
TABLES = f"""
import pipelines.authoring as tb
from pyspark.sql import functions as F

tb.landing("bronze.impressions", tb.files("impressions", "json", tb.schema("{IMPRESSION}")))
tb.landing("bronze.clicks", tb.files("clicks", "json", tb.schema("{CLICK}")))


@tb.gold(
    keys="click_id",
    watermark={{
        "bronze_impressions": tb.watermark("shown_at", "10 minutes"),
        "bronze_clicks": tb.watermark("clicked_at", "2 minutes"),
    }},
)
def clicked(bronze_impressions, bronze_clicks):
    "Clicks within 5 minutes of their impression."
    shown = bronze_impressions.select("impression_id", "user_id", "shown_at")
    clicks = bronze_clicks.select("click_id", F.col("impression_id").alias("clicked_id"), "clicked_at")
    within = F.expr(
        "impression_id = clicked_id AND clicked_at >= shown_at AND clicked_at <= shown_at + INTERVAL 5 MINUTES"
    )
    return shown.join(clicks, within).select("click_id", "impression_id", "user_id", "shown_at", "clicked_at")
"""
START = datetime(2026, 3, 2, 10, tzinfo=UTC)


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="seconds").replace("+00:00", "Z")


def _drops() -> list[tuple[list[dict], list[dict]]]:
    """Two drops of impressions and clicks; the second also brings rows far behind the first's watermark."""
    drops = []
    for d in range(2):
        base = START + timedelta(hours=d)
        impressions = [
            {"impression_id": f"i{d}-{k}", "user_id": f"u{k % 7}", "shown_at": _iso(base + timedelta(minutes=k))}
            for k in range(40)
        ]
        clicks = [
            {
                "click_id": f"c{d}-{k}",
                "impression_id": f"i{d}-{k}",
                "clicked_at": _iso(base + timedelta(minutes=k + k % 7)),
            }
            for k in range(0, 40, 2)
        ]
        if d == 1:  # late: an impression and its click from the first drop's start, and a click for drop 0
            impressions.append({"impression_id": "late-i", "user_id": "u1", "shown_at": _iso(START)})
            clicks.append(
                {"click_id": "late-c", "impression_id": "late-i", "clicked_at": _iso(START + timedelta(minutes=1))}
            )
            clicks.append(
                {"click_id": "late-c0", "impression_id": "i0-3", "clicked_at": _iso(START + timedelta(minutes=4))}
            )
        drops.append((impressions, clicks))
    return drops


def _land(landing: Path, index: int, impressions: list[dict], clicks: list[dict]) -> None:
    for folder, rows in (("impressions", impressions), ("clicks", clicks)):
        target = landing / folder
        target.mkdir(parents=True, exist_ok=True)
        (target / f"{folder}-{index}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _reference_step(spark: SparkSession, landing: Path, checkpoint: Path, join: Any, rows: list) -> int:
    """One availableNow step of plain Spark over the landing folders; returns the input rows it dropped as late."""
    impressions = spark.readStream.schema(IMPRESSION).json(str(landing / "impressions"))
    clicks = spark.readStream.schema(CLICK).json(str(landing / "clicks"))
    joined: DataFrame = join(
        impressions.withWatermark("shown_at", "10 minutes"), clicks.withWatermark("clicked_at", "2 minutes")
    )

    def collect(batch: DataFrame, _batch_id: int) -> None:
        rows.extend(batch.collect())

    query = (
        joined.writeStream.outputMode("append")
        .foreachBatch(collect)
        .trigger(availableNow=True)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    query.awaitTermination()
    return sum(op["numRowsDroppedByWatermark"] for p in query.recentProgress for op in p["stateOperators"])


def _sorted(rows: list) -> list[tuple]:
    return sorted((r.click_id, r.impression_id, r.user_id, r.shown_at, r.clicked_at) for r in rows)


def test_a_join_of_inputs_with_their_own_time_columns_equals_plain_spark(spark, tmp_path):
    settings = make_settings(tmp_path / "home")
    package = write_package(tmp_path / "packages", "own_watermarks", {"tables.py": TABLES})
    registry = load_registry([package])
    join = importlib.import_module(f"{package}.tables").clicked
    spec = registry.get("gold.clicked")
    assert spec.watermark is not None and spec.watermark.column == "shown_at"
    assert [s.watermark.column for s in spec.secondary_sources if s.watermark] == ["clicked_at"]
    expected: list = []
    dropped = 0
    for index, (impressions, clicks) in enumerate(_drops()):
        _land(settings.landing, index, impressions, clicks)
        run_pipeline(spark, settings, registry)
        dropped += _reference_step(spark, settings.landing, tmp_path / "reference", join, expected)
    got = table(spark, settings, "gold.clicked").collect()
    assert _sorted(got) == _sorted(expected)
    assert len(expected) >= 30
    assert dropped > 0, "the second drop must bring rows plain Spark drops as late"


def test_a_watermark_for_a_parameter_the_function_does_not_have_names_the_parameters(tmp_path):
    body = TABLES.replace('"bronze_clicks": tb.watermark', '"clicks": tb.watermark')
    package = write_package(tmp_path, "misnamed_watermark", {"tables.py": body})
    with pytest.raises((DeclarationError, ConfigError)) as refused:
        load_registry([package])
    message = str(refused.value)
    assert "watermark names 'clicks', which is not a stream parameter of the function" in message
    assert "bronze_impressions, bronze_clicks" in message
    assert "tables.py" in message


def test_late_rows_need_a_watermark_on_every_stream(tmp_path):
    body = TABLES.replace('keys="click_id",', 'keys="click_id", late=True,').replace(
        '"bronze_clicks": tb.watermark("clicked_at", "2 minutes"),', ""
    )
    package = write_package(tmp_path, "half_watermarked", {"tables.py": body})
    with pytest.raises((DeclarationError, ConfigError)) as refused:
        load_registry([package])
    assert "stream 'bronze_clicks' has no watermark" in str(refused.value)
