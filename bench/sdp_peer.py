"""Benchmark `sdp_peer`: the `wide_csv` chain (landed CSV → silver unique by a two-column key → a gold aggregate)
run by Tributary's CLI and by Apache Spark Declarative Pipelines' `spark-pipelines run` on the same files, one
whole process per run on each side: the first load, a no-op re-run and a 10,000-row increment (100 rows sent
again). Both golds are then read back and compared row by row.

The peer runs pyspark 4.3.0 in a venv of its own (`bench/sdp_requirements.txt`): on 4.1 the natural silver
(`dropDuplicates` on a pipeline table) fails at registration (SPARK-57489). No Iceberg runtime exists for Spark 4.3,
so its tables are Parquet in a Hive metastore (the default in-memory catalog fails a second run with
LOCATION_ALREADY_EXISTS). It gets the same driver memory and shuffle partitions as ours, and Spark's local master
(`spark-pipelines` refuses a master beside its Spark Connect server).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.wide_csv import DAYS, FILES, INCREMENT_ROWS, RESENT_ROWS, _generate, _gold_rows, _land
from bench.wide_data import WIDE_SCHEMA
from bench.wide_tables import FOLDER
from infra.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
PROJECT = Path(__file__).resolve().parent / "sdp_project"
REQUIREMENTS = Path(__file__).resolve().parent / "sdp_requirements.txt"
SDP_VENV = ROOT / ".venv-sdp"
SDP_GOLD = "gold_wide_daily"
# `spark-pipelines` stamps each line of its event log "YYYY-MM-DD HH:MM:SS: ..."
_LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d): (.*)$")


def sdp_python(venv: Path = SDP_VENV) -> Path:
    """The peer's interpreter, installing `bench/sdp_requirements.txt` into `venv` first when they changed."""
    python = venv / "bin" / "python"
    want = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    stamp = venv / ".installed"
    if python.exists() and stamp.exists() and stamp.read_text() == want:
        return python
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", str(REQUIREMENTS)],
        check=True,
        env=env,
    )
    stamp.write_text(want)
    return python


def _ddl() -> str:
    return ", ".join(f"{field.name} {field.dataType.simpleString()}" for field in WIDE_SCHEMA.fields)


def write_sdp_project(folder: Path, landing: Path, shuffle_partitions: int) -> Path:
    """The peer's pipeline project under `folder` (its spec and the transformations of `bench/sdp_project`),
    reading CSV files from `landing`; the spec's path."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(PROJECT / "transformations", folder / "transformations", dirs_exist_ok=True)
    spec = {
        "name": "wide_orders",
        "storage": (folder / "storage").as_uri(),
        "libraries": [{"glob": {"include": "transformations/**"}}],
        "configuration": {
            "wide.landing": str(landing),
            "wide.schema": _ddl(),
            "spark.sql.shuffle.partitions": str(shuffle_partitions),
            "spark.sql.session.timeZone": "UTC",
        },
    }
    path = folder / "spark-pipeline.yml"
    path.write_text(json.dumps(spec, indent=2))  # YAML is a superset of JSON
    return path


def sdp_run_seconds(log: str) -> float:
    """Seconds from the peer's first event-log line (loading the spec) to "Run is COMPLETED", whole seconds;
    raises if the run did not complete."""
    stamps = [(m.group(1), m.group(2)) for m in map(_LOG_LINE.match, log.splitlines()) if m]
    done = [at for at, text in stamps if text.startswith("Run is COMPLETED")]
    if not stamps or not done:
        raise RuntimeError(f"spark-pipelines did not complete:\n{log[-3000:]}")

    def parsed(at: str) -> datetime:
        return datetime.strptime(at, "%Y-%m-%d %H:%M:%S")

    return (parsed(done[-1]) - parsed(stamps[0][0])).total_seconds()


def _sdp_command(settings: Settings, python: Path, spec: Path, folder: Path) -> list[str]:
    # Only what must be set at launch; the session's settings are in the spec's configuration. Spark's options
    # come before `--spec`, which `spark-pipelines` hands on to its CLI with what follows.
    return [
        str(python.parent / "spark-pipelines"),
        "run",
        "--conf",
        "spark.sql.catalogImplementation=hive",
        "--conf",
        f"spark.sql.warehouse.dir={folder / 'warehouse'}",
        "--conf",
        f"spark.driver.extraJavaOptions=-Dderby.system.home={folder}",
        "--driver-memory",
        settings.driver_memory,
        "--spec",
        str(spec),
    ]


def _sdp_env(python: Path) -> dict[str, str]:
    """The environment of a `spark-pipelines` run: the peer's own pyspark as SPARK_HOME and its interpreter first,
    so nothing of ours (a SPARK_HOME, PYTHONPATH or the venv's `python3` on PATH) picks our pyspark 4.1 instead."""
    home = subprocess.run(
        [str(python), "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_")) and k != "PYTHONPATH"}
    env.update(SPARK_HOME=home, PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python))
    env["PATH"] = os.pathsep.join((str(python.parent), env.get("PATH", "")))
    return env


def _run_sdp(settings: Settings, python: Path, spec: Path, folder: Path) -> dict[str, float]:
    env = _sdp_env(python)
    started = time.perf_counter()
    done = subprocess.run(
        _sdp_command(settings, python, spec, folder), cwd=folder, env=env, capture_output=True, text=True
    )
    seconds = round(time.perf_counter() - started, 2)
    log = done.stdout + done.stderr
    if done.returncode != 0:
        raise RuntimeError(f"spark-pipelines run failed ({done.returncode}):\n{log[-3000:]}")
    return {"seconds": seconds, "run_seconds": sdp_run_seconds(log)}


def _tributary_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRIBUTARY_", "DAGSTER_"))}
    env.update(TRIBUTARY_HOME=str(home), DAGSTER_HOME=str(home / "dagster"), TRIBUTARY_DATASETS="bench.wide_tables")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return env


def _run_tributary(home: Path) -> dict[str, float]:
    """`tributary run --with-upstream gold.wide_daily`, as a user runs it, timed as a whole process."""
    from bench.wide_tables import GOLD

    command = [str(Path(sys.executable).parent / "tributary"), "run", "--with-upstream", GOLD]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=_tributary_env(home), capture_output=True, text=True)
    seconds = round(time.perf_counter() - started, 2)
    if done.returncode != 0:
        raise RuntimeError(f"tributary run failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    return {"seconds": seconds}


def read_golds(config: dict[str, Any]) -> dict[str, Any]:
    """Both golds' rows (`python -m bench.sdp_peer golds CONFIG`, in a process of its own), and silver's rows."""
    from pyspark.sql import functions as F

    from bench.wide_tables import GOLD, GOLD_COLUMNS, SILVER
    from infra.spark import get_spark
    from pipelines.io.formats import table_format
    from pipelines.run.run_log import RUN_LOG

    settings = Settings.from_env(home=Path(config["home"])).with_home(Path(config["home"]))
    spark = get_spark(settings)
    fmt = table_format(settings)
    ours = fmt.read(spark, GOLD).select(*GOLD_COLUMNS).collect()
    peer_path = Path(config["sdp"]) / "warehouse" / SDP_GOLD
    peer = spark.read.parquet(str(peer_path)).select(*GOLD_COLUMNS).collect()
    silver = spark.read.parquet(str(Path(config["sdp"]) / "warehouse" / "silver_wide_orders")).count()
    # Our gold's runs, oldest first: which stages each spent time in (`batch.partial`: the batch was folded in).
    runs = fmt.read(spark, RUN_LOG).filter(F.col("table_name") == GOLD).orderBy("started_at")
    stages = [json.loads(r.stage_seconds or "{}") for r in runs.select("stage_seconds").collect()]
    return {
        "ours": _gold_rows(ours),
        "gold_stages": stages,
        "sdp": _gold_rows(peer),
        "silver_rows": fmt.stats(spark, SILVER).rows,
        "sdp_silver_rows": silver,
    }


def bench_sdp_peer(settings: Settings, rows: int = 5_000_000, increment_rows: int = INCREMENT_ROWS) -> dict[str, Any]:
    """Run the chain on both sides (load, no-op, increment) and compare their golds."""
    root = settings.home
    data, increment = _generate(root / "data", rows, FILES, DAYS, increment_rows)
    python = sdp_python()
    ours_home, peer = root / "tributary-home", root / "sdp"
    ours_landing = Settings.from_env(home=ours_home).with_home(ours_home).landing / FOLDER
    peer_landing = peer / "landing"
    spec = write_sdp_project(peer, peer_landing, settings.shuffle_partitions)
    steps: dict[str, dict[str, Any]] = {}
    for step, folder in (("load", data), ("noop", None), ("increment", increment)):
        if folder is not None:
            _land(ours_landing, folder)
            _land(peer_landing, folder)
        steps[step] = {"sdp": _run_sdp(settings, python, spec, peer), "tributary": _run_tributary(ours_home)}
    done = subprocess.run(
        [sys.executable, "-m", "bench.sdp_peer", "golds", json.dumps({"home": str(ours_home), "sdp": str(peer)})],
        cwd=ROOT,
        env=_tributary_env(ours_home),
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"reading the golds failed:\n{done.stderr[-3000:]}")
    golds = json.loads(done.stdout.strip().splitlines()[-1])

    def ratio(step: str) -> float:
        return round(steps[step]["tributary"]["seconds"] / steps[step]["sdp"]["seconds"], 3)

    expected = rows + increment_rows - RESENT_ROWS
    result: dict[str, Any] = {
        "rows": rows,
        "increment_rows": increment_rows,
        "sdp_runtime": "pyspark 4.3.0, Parquet tables in a Hive metastore",
        "tributary_runtime": "pyspark 4.1.4, Iceberg tables (the home's default format)",
        "steps": steps,
        "ratio_first_load_vs_sdp": ratio("load"),
        "ratio_noop_vs_sdp": ratio("noop"),
        "ratio_increment_vs_sdp": ratio("increment"),
        "gold_rows": len(golds["ours"]),
        "gold_equal": golds["ours"] == golds["sdp"],
        # The increment's batch folded into the stored aggregate rather than recomputing the days it touched.
        "gold_increment_folded": "batch.partial" in golds["gold_stages"][-1],
        "gold_increment_stages": golds["gold_stages"][-1],
        "silver_rows": golds["silver_rows"],
        "sdp_silver_rows": golds["sdp_silver_rows"],
        "silver_rows_expected": expected,
    }
    result["targets"] = {
        "first_load_within_1.0x_sdp": result["ratio_first_load_vs_sdp"] <= 1.0,
        "increment_within_0.7x_sdp": result["ratio_increment_vs_sdp"] <= 0.7,
        "noop_within_0.2x_sdp": result["ratio_noop_vs_sdp"] <= 0.2,
        "gold_equal": result["gold_equal"],
        "silver_rows_exact": golds["silver_rows"] == expected == golds["sdp_silver_rows"],
    }
    return result


if __name__ == "__main__" and sys.argv[1] == "golds":
    print(json.dumps(read_golds(json.loads(sys.argv[2])), default=str))
