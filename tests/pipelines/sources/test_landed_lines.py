"""Landed lines are counted once per file version (a reconciliation re-reads only files new or changed since), and
equal bronze's rows file by file: read from the files table bronze's batches record, or counted from bronze's rows
whenever those records do not add up to the table."""

from __future__ import annotations

import os

from pyspark.sql import functions as F

from pipelines.authoring.load import load_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io.formats import table_format
from pipelines.run.pipeline import run_pipeline
from pipelines.sources import landed_lines
from pipelines.spec.registry import Registry
from quality.reconcile import pipelines_of, reconcile_pipeline
from tests.support.homes import make_settings

ECOMMERCE = load_registry(["pipelines.datasets.ecommerce"])
SOURCE = ECOMMERCE.get("bronze.events").source
CHAIN = Registry([ECOMMERCE.get("bronze.events"), ECOMMERCE.get("silver.events")])


def test_line_counts_are_kept_per_file_version_and_a_changed_file_is_counted_again(tmp_path, monkeypatch):
    settings = make_settings(tmp_path / "home")
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text('{"x":1}\n{"x":2}\n')
    b.write_text('{"x":1}\n\n{"x":3}\n{"x":4}\n')  # a blank line is not a row
    assert landed_lines._counted_lines(settings, "t.main", {"a": a, "b": b}, SOURCE) == {"a": 2, "b": 3}

    counted = []
    real = landed_lines._lines
    monkeypatch.setattr(landed_lines, "_lines", lambda path, source: counted.append(path.name) or real(path, source))
    assert landed_lines._counted_lines(settings, "t.main", {"a": a, "b": b}, SOURCE) == {"a": 2, "b": 3}
    assert counted == []  # both known: nothing read again

    stat = a.stat()
    a.write_text('{"x":1}\n{"x":9}\n')  # same size, rewritten in place: a new modification time
    os.utime(a, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    b.write_text('{"x":1}\n')
    assert landed_lines._counted_lines(settings, "t.main", {"a": a, "b": b}, SOURCE) == {"a": 2, "b": 1}
    assert sorted(counted) == ["a.json", "b.json"]


def test_a_bronze_row_lost_behind_the_pipeline_is_named_with_its_file(spark, format_settings):
    s, fmt = format_settings, table_format(format_settings)
    report = generate(s.landing, rows=400, files=2, seed=61)
    run_pipeline(spark, s, CHAIN)
    (pipeline,) = pipelines_of(CHAIN)
    landed = reconcile_pipeline(spark, s, pipeline).outcomes[0]
    assert landed.success and landed.observed == f"{report.lines} landed lines, {report.lines} bronze rows in 2 files"

    bronze = fmt.read(spark, "bronze.events")
    victim = bronze.filter("event_id IS NOT NULL").orderBy("_source_file", "event_id").first()
    same = (F.col("_source_file") == victim["_source_file"]) & F.col("event_id").eqNullSafe(victim["event_id"])
    kept = bronze.filter(~same)
    fmt.overwrite(kept.localCheckpoint(), "bronze.events")
    lost = reconcile_pipeline(spark, s, pipeline).outcomes[0]
    name = victim["_source_file"].rsplit("/", 1)[-1]
    assert not lost.success and lost.unexpected_count == 1
    assert [sample.split(":")[0] for sample in lost.samples] == [name] and "in bronze" in lost.samples[0]
