"""The e-commerce pipeline on `local[2]` against the one-host cluster (two 1-core workers, PostgreSQL catalog), at
1 M and 4 M events: seconds per run and how they grow with the data (4 M / 1 M; 4.0 is linear).

Each run is `tributary run` in a fresh process and a fresh home reading the same landed files, so both profiles pay
one JVM start; the cluster's run also starts its executors on the workers. Both runs use the same driver memory and
2 cores in all (local[2], or 2 executors of 1 core each).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from infra.deploy import local_cluster
from infra.settings import Settings
from pipelines.datasets.ecommerce.sample_data import generate

TABLES = ("bronze.events", "silver.events", "gold.daily_revenue", "gold.event_counts_5m")
SIZES = (1_000_000, 4_000_000)
REPO = Path(__file__).resolve().parent.parent


def _run(home: Path, landing: Path, env: dict[str, str], catalog: str) -> float:
    """Wall seconds of one `tributary run` of the tables in a fresh process."""
    settings = {"TRIBUTARY_HOME": str(home), "TRIBUTARY_LANDING": str(landing), "TRIBUTARY_CATALOG_NAME": catalog}
    command = [str(Path(sys.executable).parent / "tributary"), "run", *TABLES]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env={**os.environ, **env, **settings}, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"tributary run failed ({done.returncode}): {done.stderr[-1500:]}")
    return round(seconds, 2)


def bench_cluster(settings: Settings, sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    """Seconds of the pipeline per size on local[2] and on the one-host cluster, and the growth ratios."""
    common = {"TRIBUTARY_DRIVER_MEMORY": "2g", "TRIBUTARY_SHUFFLE_PARTITIONS": "4"}
    folder = Path(tempfile.mkdtemp(prefix="tributary-bench-cluster-"))  # PostgreSQL's user must reach it
    cluster = local_cluster.up(folder, workers=2, cores=1, memory="3g")
    try:
        profiles = {
            "local2": {**common, "TRIBUTARY_SPARK_MASTER": "local[2]"},
            "cluster": {**common, **cluster.env(), "TRIBUTARY_EXECUTOR_MEMORY": "2g"},
        }
        result: dict[str, Any] = {name: {} for name in profiles}
        for size in sizes:
            landing = settings.home / f"landing-{size}"
            generate(landing, rows=size, files=max(size // 100_000, 1), seed=9, progress=False)
            for name, env in profiles.items():
                home = settings.home / f"{name}-{size}"
                result[name][f"seconds_{size // 1_000_000}m"] = _run(home, landing, env, f"b{name}{size}")
        for name in profiles:
            times = list(result[name].values())
            result[name]["growth"] = round(times[-1] / times[0], 2)
        first = f"seconds_{sizes[0] // 1_000_000}m"
        result["cluster_vs_local2"] = round(result["cluster"][first] / result["local2"][first], 2)
    finally:
        local_cluster.down(folder)
        shutil.rmtree(folder, ignore_errors=True)
    return result
