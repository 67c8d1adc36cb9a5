"""Repairs cascade: a reprocessed silver day is carried into gold in the same call, equal to a from-scratch build."""

from __future__ import annotations

from datetime import date

import pytest
from dagster import DagsterInstance

from orchestration.cli.main import main
from orchestration.reprocess import build_reprocess_job
from orchestration.resources import SparkResource
from pipelines.datasets import default_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.ops.repair import reprocess_downstream
from pipelines.run.pipeline import run_pipeline
from tests.support.helpers import table
from tests.support.reference import classify, load_landing

GOLD = "gold.daily_revenue"
CHAIN = ("bronze.events", "silver.events", GOLD, "gold.event_counts_5m")
D2 = date(2026, 11, 2)


def _gold(spark, settings) -> dict:
    return {
        (r.event_date, r.category, r.currency): (r.orders, r.units, r.revenue)
        for r in table(spark, settings, GOLD).collect()
    }


@pytest.mark.slow
def test_reprocessed_silver_day_reaches_gold_equal_to_a_build_without_the_removed_orders(spark, fresh_settings):
    s = fresh_settings
    generate(s.landing, rows=1200, files=3, seed=3)
    run_pipeline(spark, s, default_registry(), CHAIN)
    before = _gold(spark, s)
    reference = classify(load_landing(s.landing))
    gone = [
        event_id
        for event_id, event in reference.valid_events.items()
        if event["event_type"] == "order" and event["event_time"].date() == D2
    ][:5]
    assert len(gone) == 5
    # The orders vanish upstream (as a producer's retraction would): deleted from bronze.
    ids = ", ".join(f"'{i}'" for i in gone)
    spark.sql(f"DELETE FROM {s.catalog_name}.bronze.events WHERE event_id IN ({ids})")

    repair = reprocess_downstream(spark, s, default_registry(), "silver.events", D2, D2)

    assert [(r.table, r.operation) for r in repair.reports] == [("silver.events", "reprocess"), (GOLD, "backfill")]
    assert "full-refresh silver.events" in repair.not_carried["gold.event_counts_5m"]
    assert table(spark, s, "silver.events").filter(f"event_id IN ({ids})").count() == 0
    for event_id in gone:
        del reference.valid_events[event_id]
    expected = reference.daily_revenue()
    got = _gold(spark, s)
    assert got == expected  # equal to a from-scratch computation without the removed orders
    assert {k: v for k, v in got.items() if k[0] != D2} == {k: v for k, v in before.items() if k[0] != D2}
    assert got != before

    # The Dagster job runs the same repair and records each table it rewrote.
    job = build_reprocess_job(default_registry())
    config = {
        "ops": {"reprocess_range": {"config": {"table": "silver.events", "start": "2026-11-02", "end": "2026-11-02"}}}
    }
    with DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(
            run_config=config,
            instance=instance,
            resources={"spark": SparkResource(home=str(s.home), catalog_name=s.catalog_name)},
        )
    assert [".".join(e.asset_key.path) for e in result.get_asset_materialization_events()] == ["silver.events", GOLD]
    assert _gold(spark, s) == expected


@pytest.mark.slow
def test_a_corrected_landing_file_reaches_gold_through_a_bronze_reprocess(spark, fresh_settings):
    s = fresh_settings
    gen = generate(s.landing, rows=900, files=3, seed=4)
    run_pipeline(spark, s, default_registry(), CHAIN)
    # The producer corrects a file: its order lines are withdrawn (a silver reprocess alone would not see it).
    fixed = gen.files[1]
    lines = fixed.read_text().splitlines(keepends=True)
    orders = [line for line in lines if '"event_type": "order"' in line or '"event_type":"order"' in line]
    assert len(orders) >= 5
    fixed.write_text("".join(line for line in lines if line not in orders))

    today = date.today()
    repair = reprocess_downstream(spark, s, default_registry(), "bronze.events", today, today)

    done = [(r.table, r.operation) for r in repair.reports]
    assert done == [("bronze.events", "reprocess"), ("silver.events", "reprocess"), (GOLD, "backfill")]
    assert set(repair.not_carried) == {"gold.event_counts_5m"}
    assert _gold(spark, s) == classify(load_landing(s.landing)).daily_revenue()  # as if built from the fixed files


def test_refresh_and_reprocess_commands_refuse_before_spark(tmp_path, capsys):
    home = str(tmp_path / "home")
    assert main(["--home", home, "refresh", "silver.events"]) == 2
    assert "run it again with --confirm silver.events" in capsys.readouterr().err
    assert main(["--home", home, "refresh", "silver.events", "--confirm", "silver"]) == 2
    assert "set confirm to 'silver.events'" in capsys.readouterr().err
    assert main(["--home", home, "reprocess", "silver.nope", "--from", "2026-11-01", "--to", "2026-11-01"]) == 2
    assert "no table 'silver.nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--home", home, "reprocess", "silver.events", "--from", "11/01/2026", "--to", "2026-11-01"])
    assert "expected a day as YYYY-MM-DD" in capsys.readouterr().err
