"""`make bench`: run every benchmark section on fresh homes and write bench/results.json."""

from __future__ import annotations

import importlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path

from infra.settings import Settings

RESULTS = Path(__file__).resolve().parent / "results.json"
# (module, function) of each section; one that cannot be imported fails the bench (exit 1).
SECTIONS = (
    ("bench.pipeline", "bench_pipeline"),
    ("bench.formats", "bench_formats"),
    ("bench.kafka", "bench_kafka"),
    ("bench.quality", "bench_quality"),
    ("bench.maintenance", "bench_maintenance"),
    ("bench.sql", "bench_sql"),
    ("bench.freshness", "bench_freshness"),
    ("bench.streaming", "bench_streaming"),
    ("bench.many_files", "bench_many_files"),
    ("bench.scale", "bench_scale"),
    ("bench.wide_csv", "bench_wide_csv"),
    ("bench.sdp_peer", "bench_sdp_peer"),
    ("bench.cluster", "bench_cluster"),
    ("bench.serving", "bench_serving"),
    ("bench.sinks", "bench_sinks"),
)


def _flatten(prefix: str, value: object, out: dict[str, object]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = value


def main() -> int:
    """Run the sections, print a table, write the JSON report; exit 1 if a section failed."""
    only = set(sys.argv[1:])
    report: dict[str, object] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    failed = False
    root = Path(tempfile.mkdtemp(prefix="tributary-bench-"))
    root.chmod(0o711)  # the serving section's PostgreSQL runs as the postgres user, which must pass through
    try:
        for index, (module_name, func_name) in enumerate(SECTIONS):
            section = module_name.split(".")[-1]
            if only and section not in only:
                continue
            try:
                entry = getattr(importlib.import_module(module_name), func_name)
            except (ImportError, AttributeError):
                # A section that cannot be imported is a broken bench, never one to skip quietly.
                failed = True
                report[section] = {"error": traceback.format_exc(limit=5)}
                print(f"== {section}: cannot be imported\n{traceback.format_exc(limit=3)}", file=sys.stderr)
                continue
            settings = Settings.from_env(home=root / section).with_home(root / section)
            settings = replace(settings, catalog_name=f"bench{index}")
            print(f"== {section}", flush=True)
            started = time.perf_counter()
            try:
                report[section] = entry(settings)
            except Exception:
                failed = True
                report[section] = {"error": traceback.format_exc(limit=5)}
            print(f"   done in {time.perf_counter() - started:.1f} s", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    RESULTS.write_text(json.dumps(report, indent=2, default=str) + "\n")
    flat: dict[str, object] = {}
    for key, value in report.items():
        if key not in ("started", "machine"):
            _flatten(key, value, flat)
    width = max((len(k) for k in flat), default=10)
    for key, value in flat.items():
        print(f"{key:<{width}}  {value}")
    print(f"\nwrote {RESULTS}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
