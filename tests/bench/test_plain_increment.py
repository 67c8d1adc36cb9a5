"""The plain PySpark side of the small-increment bench writes what Tributary writes, so the ratio compares like work."""

from __future__ import annotations

from bench.plain_increment import CHAIN, copy_chain, plain_increment, plain_table
from pipelines.datasets import default_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.io.formats import table_format
from pipelines.run.runner import run_table


def test_the_plain_increment_lands_the_rows_tributary_lands(spark, fresh_settings) -> None:
    registry = default_registry()
    generate(fresh_settings.landing, rows=400, files=2, seed=1)
    for name in CHAIN:
        run_table(spark, fresh_settings, registry.get(name))
    copy_chain(spark, fresh_settings)
    landed = generate(fresh_settings.landing, rows=120, files=1, seed=2)
    for name in CHAIN:
        run_table(spark, fresh_settings, registry.get(name))

    out = plain_increment(spark, fresh_settings, registry, [str(f) for f in landed.files])

    assert out["seconds"] >= out["bronze_seconds"] > 0
    fmt = table_format(fresh_settings)

    def both(table: str, *columns: str) -> tuple[list[tuple], list[tuple]]:
        def rows(qualified: str) -> list[tuple]:
            return sorted(tuple(r) for r in spark.table(qualified).select(*columns).collect())

        return rows(plain_table(fresh_settings, table)), rows(fmt.qualified(table))

    plain_bronze, bronze = both("bronze.events", "_source_file")
    assert len(plain_bronze) == len(bronze) > 500
    plain_silver, silver = both("silver.events", "event_id", "event_type", "event_time", "amount", "event_date")
    assert plain_silver == silver and len(silver) > 400
    plain_gold, gold = both("gold.daily_revenue", "event_date", "category", "currency", "orders", "units", "revenue")
    assert plain_gold == gold and gold
