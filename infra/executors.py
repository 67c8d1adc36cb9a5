"""What a cluster's executors must have before a run writes anything, checked once when a session starts.

On a cluster the Python code of a run (parsers, Arrow readers, Kafka readers) runs in Python workers that the
executors start on their own hosts with the interpreter `PYSPARK_PYTHON` names (Tributary sets it to the driver's
own interpreter unless it is set). A worker host without that interpreter, with another Python version, or
without Tributary installed in it would fail every task of the first batch deep in a stack trace; this check
turns each into one line before any table is touched. It also bounds the wait for executors: a cluster whose
workers are gone or too small would otherwise leave the run waiting for resources forever. The bound is
`TRIBUTARY_EXECUTOR_WAIT`, by default `TRIBUTARY_LOCK_WAIT` (at least 30 s): executors held by another run are
waited for like its table locks.
"""

from __future__ import annotations

import os
import re
import threading
import types
import uuid
from typing import Any

from pyspark.sql import SparkSession

# Executors take a few seconds to start; a busy cluster may hold its cores far longer (the caller decides).
MIN_WAIT_SECONDS = 30
# What Python code on executors imports: Arrow for the readers, the platform's own modules for its functions.
NEEDED_MODULES = ("pyarrow", "pandas", "pipelines", "infra")


def _probe(_: Any, modules: tuple[str, ...] = NEEDED_MODULES) -> list[tuple[str, str, list[str]]]:
    """On an executor: its host, its Python, and the needed modules it cannot import."""
    import importlib
    import socket
    import sys

    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            missing.append(f"{name} ({exc})")
    return [(socket.gethostname(), sys.executable, missing)]


def executor_wait(lock_wait: float, given: int | None) -> float:
    """Seconds to wait for a first task: the `TRIBUTARY_EXECUTOR_WAIT` given, else the lock wait, at least
    `MIN_WAIT_SECONDS` (executors take a few seconds to start)."""
    return float(given) if given is not None else max(lock_wait, MIN_WAIT_SECONDS)


def executor_problem(session: SparkSession, master: str, driver_python: str, wait: float) -> str | None:
    """Run one small task per slot on the cluster (waiting up to `wait` s for executors); what is wrong with its
    executors' Python, or None."""
    context = session.sparkContext
    slots = max(context.defaultParallelism, 1)
    group = f"tributary-executor-check-{uuid.uuid4().hex}"
    # Shipped by value: the executor's Python may be unable to import this module, which is what it checks.
    probe = types.FunctionType(_probe.__code__, {"NEEDED_MODULES": NEEDED_MODULES}, "probe", _probe.__defaults__)
    outcome: dict[str, Any] = {}

    def run() -> None:
        context.setJobGroup(group, "Tributary: executor check", interruptOnCancel=True)
        try:
            outcome["rows"] = context.parallelize(range(slots), slots).mapPartitions(probe).collect()
        except Exception as exc:  # classified below: the message is what the user needs
            outcome["error"] = exc

    context.setLogLevel("OFF")  # the failed tasks' log lines: the one line returned says what matters
    try:
        worker = threading.Thread(target=run, name="tributary-executor-check", daemon=True)
        worker.start()
        worker.join(wait)
        timed_out = worker.is_alive()
        if timed_out:
            context.cancelJobGroup(group)
            worker.join(30)
    finally:
        context.setLogLevel("ERROR")
    if "rows" in outcome:
        return _mismatch(outcome["rows"], driver_python)
    if "error" in outcome and not timed_out:
        return _failure(str(outcome["error"]), os.environ.get("PYSPARK_PYTHON", driver_python))
    return (
        f"no executor of {master} ran a task within {wait:g} s: check that its workers are up and have free "
        "cores and memory for TRIBUTARY_EXECUTOR_MEMORY, TRIBUTARY_EXECUTOR_CORES and TRIBUTARY_MAX_CORES "
        "(the master's web UI lists workers and what each application holds), or wait longer with "
        "TRIBUTARY_EXECUTOR_WAIT"
    )


def _failure(text: str, python: str) -> str:
    missing = re.search(r'Cannot run program "([^"]+)"', text)
    if missing:
        return (
            f"the cluster's workers have no Python at {missing[1]} (PYSPARK_PYTHON): install the same Python "
            "environment at that path on every worker, or set PYSPARK_PYTHON to one that exists on all of them"
        )
    version = re.search(r"Python in worker has different version:? ?\(?([0-9, ]+)\)?", text)
    if version:
        return (
            f"the cluster's workers run Python {version[1].replace(', ', '.')} at {python} (PYSPARK_PYTHON), not the "
            "driver's: install the driver's Python version on every worker"
        )
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    cause = next((line for line in lines if re.search(r"(Exception|Error)\b:", line)), lines[0] if lines else "?")
    return f"a test task on the cluster's executors failed: {cause[:300]}"


def _mismatch(rows: list[tuple[str, str, list[str]]], driver_python: str) -> str | None:
    for host, executable, missing in rows:
        if missing:
            return (
                f"Python {executable} on worker {host} cannot import {', '.join(missing)}: install Tributary and its "
                f"dependencies into it (the driver uses {driver_python}), or point PYSPARK_PYTHON at a Python with them"
            )
    return None
