"""Benchmark `wide_csv`: a generated CSV table of millions of rows and 16 typed columns (`bench.wide_data`) in
12 files through bronze → silver (dedupe on a two-column key) → gold (an aggregate per day and region), as
declared in `bench.wide_tables`, against the plain PySpark batch code a data engineer would write into Iceberg
with the same partitioning, and DuckDB on the same files.

Each Spark side runs in a process of its own (`python -m bench.wide_csv <side> <config>`), so each starts cold
and its peak memory is its own: the resident set at its peak of the Python process plus its JVM (VmHWM). Then
10,000 rows (100 of them sent again) land in the big table and in a small one: an increment should cost about
the same whatever the table already holds (`ratio_increment_large_vs_small`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.wide_data import WIDE_SCHEMA, generate_wide_csv
from infra.settings import Settings

INCREMENT_ROWS = 10_000
RESENT_ROWS = 100
DAYS = 730  # two years of orders
FILES = 12


def _settings(config: dict[str, Any]) -> Settings:
    home = Path(config["home"])
    return replace(Settings.from_env(home=home).with_home(home), catalog_name=config["catalog"])


def _peak_rss_mb() -> float:
    """Peak resident memory of this process plus its descendants (the JVM), in MB, from /proc (VmHWM)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, frontier = {os.getpid()}, [os.getpid()]
    while frontier:
        pid = frontier.pop()
        children = [child for child, parent in parents.items() if parent == pid and child not in tree]
        tree.update(children)
        frontier.extend(children)
    total_kb = 0
    for pid in tree:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        total_kb += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)
    return round(total_kb / 1024, 1)


def _gold_rows(rows: list[Any]) -> list[list[str]]:
    return sorted([str(v) for v in r] for r in rows)


def _land(landing: Path, source: Path) -> None:
    landing.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.iterdir()):
        os.link(path, landing / path.name)


def side_tributary(config: dict[str, Any]) -> dict[str, Any]:
    """The chain as declared in `bench.wide_tables`: first load, then the increment; seconds per table."""
    from bench import wide_tables
    from infra.spark import get_spark
    from pipelines.authoring.load import load_registry
    from pipelines.io.formats import table_format
    from pipelines.io.partition_grain import table_grain
    from pipelines.run.runner import run_table

    settings = _settings(config)
    spark = get_spark(settings)
    registry = load_registry(["bench.wide_tables"])
    chain = [registry.get(name) for name in (wide_tables.BRONZE, wide_tables.SILVER, wide_tables.GOLD)]
    landing = settings.landing / wide_tables.FOLDER
    out: dict[str, Any] = {}
    for step, folder in (("load", config["data"]), ("increment", config["increment"])):
        _land(landing, Path(folder))
        seconds = {}
        for spec in chain:
            report = run_table(spark, settings, spec)
            seconds[spec.name] = {"seconds": report.seconds, "stages": report.stages}
        out[step] = seconds
        out[f"{step}_seconds"] = round(sum(s["seconds"] for s in seconds.values()), 2)
        if step == "load":
            gold = table_format(settings).read(spark, wide_tables.GOLD)
            out["gold"] = _gold_rows(gold.select(*wide_tables.GOLD_COLUMNS).collect())
    fmt = table_format(settings)
    silver = fmt.stats(spark, wide_tables.SILVER)
    out["silver_rows"], out["silver_data_files"] = silver.rows, silver.data_files
    out["silver_grain"] = table_grain(spark, fmt.qualified(wide_tables.SILVER), "ordered_at")
    out["gold_grain"] = table_grain(spark, fmt.qualified(wide_tables.GOLD), "order_date")
    out["peak_rss_mb"] = _peak_rss_mb()
    return out


def side_plain(config: dict[str, Any]) -> dict[str, Any]:
    """Plain PySpark batch code into Iceberg, partitioned as the platform partitions the same tables."""
    from pyspark.sql import functions as F
    from pyspark.sql.functions import partitioning

    from bench.wide_tables import GOLD_COLUMNS, daily
    from infra.spark import get_spark

    settings = _settings(config)
    spark = get_spark(settings)
    ns = f"{settings.catalog_name}.plain"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    out: dict[str, Any] = {}
    t = time.perf_counter()
    raw = spark.read.schema(WIDE_SCHEMA).option("header", "true").csv(config["data"])
    bronze = raw.withColumn("_source_file", F.col("_metadata.file_path")).withColumn(
        "_ingested_at", F.current_timestamp()
    )
    bronze.writeTo(f"{ns}.bronze").partitionedBy(partitioning.days("_ingested_at")).createOrReplace()
    out["bronze_seconds"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    silver = spark.table(f"{ns}.bronze").dropDuplicates(["order_id", "line_no"])
    # The platform chose days, months or years from the data; the same transform here.
    transforms = {"days": partitioning.days, "months": partitioning.months, "years": partitioning.years}
    by_time = transforms[config["silver_grain"]]
    silver.writeTo(f"{ns}.silver").partitionedBy(by_time("ordered_at")).createOrReplace()
    out["silver_seconds"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    gold_by = F.col("order_date") if config["gold_grain"] == "days" else transforms[config["gold_grain"]]("order_date")
    daily(spark.table(f"{ns}.silver")).writeTo(f"{ns}.gold").partitionedBy(gold_by).createOrReplace()
    out["gold_seconds"] = round(time.perf_counter() - t, 2)
    out["load_seconds"] = round(out["bronze_seconds"] + out["silver_seconds"] + out["gold_seconds"], 2)
    out["gold"] = _gold_rows(spark.table(f"{ns}.gold").select(*GOLD_COLUMNS).collect())
    out["peak_rss_mb"] = _peak_rss_mb()
    return out


def bench_duckdb_wide(data: Path) -> dict[str, float]:
    """The same chain in DuckDB on the same files (Parquet out), for scale."""
    import duckdb

    out_folder = data.parent / "duckdb"
    out_folder.mkdir(exist_ok=True)
    con = duckdb.connect()
    t = time.perf_counter()
    con.execute(
        f"COPY (SELECT * FROM read_csv('{data}/*.csv', header=true)) TO '{out_folder / 'bronze.parquet'}' "
        "(FORMAT parquet)"
    )
    silver = time.perf_counter()
    con.execute(
        f"COPY (SELECT * FROM '{out_folder / 'bronze.parquet'}' QUALIFY row_number() OVER (PARTITION BY order_id, "
        f"line_no) = 1) TO '{out_folder / 'silver.parquet'}' (FORMAT parquet)"
    )
    gold = time.perf_counter()
    con.execute(
        f"SELECT order_date, region, count(*), sum(quantity), sum(amount) FROM '{out_folder / 'silver.parquet'}' "
        "GROUP BY ALL"
    ).fetchall()
    end = time.perf_counter()
    con.close()
    return {
        "bronze_seconds": round(silver - t, 2),
        "silver_seconds": round(gold - silver, 2),
        "gold_seconds": round(end - gold, 2),
        "chain_seconds": round(end - t, 2),
    }


def _generate(folder: Path, rows: int, files: int, days: int, increment_rows: int) -> tuple[Path, Path]:
    """The landed data (`rows` rows in `files` files) and the increment (new rows plus some sent again)."""
    data, increment = folder / "data", folder / "increment"
    paths = generate_wide_csv(data, rows, files, seed=1, days=days)
    extra = generate_wide_csv(increment, increment_rows - RESENT_ROWS, 1, seed=2, first_id=rows, days=days)[0]
    with paths[0].open() as fh, extra.open("a") as out:
        next(fh)  # the header
        out.writelines(line for _, line in zip(range(RESENT_ROWS), fh, strict=False))
    return data, increment


def _run_side(side: str, config: dict[str, Any], in_process: bool) -> dict[str, Any]:
    if in_process:  # the test of the section: no process start (its memory figures mean nothing then)
        return json.loads(json.dumps(SIDES[side](config), default=str))
    done = subprocess.run(
        [sys.executable, "-m", "bench.wide_csv", side, json.dumps(config)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"wide_csv {side} side failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_wide_csv(
    settings: Settings,
    rows: int = 5_000_000,
    small_rows: int = 50_000,
    days: int = DAYS,
    increment_rows: int = INCREMENT_ROWS,
    in_process: bool = False,
) -> dict[str, Any]:
    """Run the chain on `rows` rows over `days` days (and the increment of `increment_rows` rows on a `small_rows`
    table too), plain Spark and DuckDB."""
    root = settings.home
    data, increment = _generate(root / "big", rows, FILES, days, increment_rows)
    small_data, _ = _generate(root / "small", small_rows, 2, days, increment_rows)
    catalog, inc = settings.catalog_name, str(increment)
    big = _run_side(
        "tributary",
        {"home": str(root / "big-home"), "catalog": f"{catalog}b", "data": str(data), "increment": inc},
        in_process,
    )
    small = _run_side(
        "tributary",
        {"home": str(root / "small-home"), "catalog": f"{catalog}s", "data": str(small_data), "increment": inc},
        in_process,
    )
    plain_config = {"home": str(root / "plain-home"), "catalog": f"{catalog}p", "data": str(data)}
    grains = {"silver_grain": big["silver_grain"], "gold_grain": big["gold_grain"]}
    plain = _run_side("plain", {**plain_config, **grains}, in_process)
    load = {name: t["seconds"] for name, t in big["load"].items()}
    bronze, silver, gold = load.values()
    result: dict[str, Any] = {
        "rows": rows,
        "days": days,
        "files": FILES,
        "columns": len(WIDE_SCHEMA.fields),
        "tributary": {"load": big["load"], "increment": big["increment"], "peak_rss_mb": big["peak_rss_mb"]},
        "plain_spark": {k: v for k, v in plain.items() if k != "gold"},
        "duckdb": bench_duckdb_wide(data),
        "increment_large_seconds": big["increment_seconds"],
        "increment_small_seconds": small["increment_seconds"],
        "silver_rows": big["silver_rows"],
        "silver_rows_expected": rows + increment_rows - RESENT_ROWS,
        "silver_data_files": big["silver_data_files"],
        "silver_partitioned_by": f"{big['silver_grain']}(ordered_at)",
        "gold_partitioned_by": "order_date" if big["gold_grain"] == "days" else f"{big['gold_grain']}(order_date)",
        "ratio_chain_vs_plain_spark": round(big["load_seconds"] / plain["load_seconds"], 2),
        "ratio_bronze_vs_plain_spark": round(bronze / plain["bronze_seconds"], 2),
        "ratio_silver_vs_plain_spark": round(silver / plain["silver_seconds"], 2),
        "ratio_gold_vs_plain_spark": round(gold / plain["gold_seconds"], 2),
        "ratio_peak_rss_vs_plain_spark": round(big["peak_rss_mb"] / plain["peak_rss_mb"], 2),
        "ratio_increment_large_vs_small": round(big["increment_seconds"] / small["increment_seconds"], 2),
        "gold_equal_to_plain_spark": big["gold"] == plain["gold"],
    }
    result["targets"] = {
        "chain_within_1.5x_plain_spark": result["ratio_chain_vs_plain_spark"] <= 1.5,
        "bronze_within_1.3x_plain_spark": result["ratio_bronze_vs_plain_spark"] <= 1.3,
        "peak_rss_within_1.3x_plain_spark": result["ratio_peak_rss_vs_plain_spark"] <= 1.3,
        "increment_large_within_2x_small": result["ratio_increment_large_vs_small"] <= 2.0,
        "silver_at_most_200_data_files": result["silver_data_files"] <= 200,
        "silver_rows_exact": result["silver_rows"] == result["silver_rows_expected"],
        "gold_equal_to_plain_spark": result["gold_equal_to_plain_spark"],
    }
    return result


SIDES = {"tributary": side_tributary, "plain": side_plain}

if __name__ == "__main__":
    print(json.dumps(SIDES[sys.argv[1]](json.loads(sys.argv[2])), default=str))
