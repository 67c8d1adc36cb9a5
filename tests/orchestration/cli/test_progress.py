"""Progress while tables run: plain lines for long runs off a terminal, a live line per table on one, and the
events a real run sends."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.live import Live

from orchestration.cli.progress import PlainProgress, TerminalProgress
from pipelines.datasets import default_registry
from pipelines.datasets.ecommerce.sample_data import generate
from pipelines.run.pipeline import run_pipeline
from pipelines.sources import progress


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_only_for_runs_that_last():
    out, clock = io.StringIO(), _Clock()
    plain = PlainProgress(out, every=10, clock=clock)
    plain.started("bronze.events")
    clock.now = 5
    plain.progressed("bronze.events", 1, 1000)
    plain.ended("bronze.events", "succeeded", 1000)  # 5 s: the summary says enough
    assert out.getvalue() == ""
    plain.started("silver.events")
    clock.now = 16
    plain.progressed("silver.events", 3, 120_000)
    clock.now = 20
    plain.progressed("silver.events", 4, 150_000)  # 4 s after the last line: quiet
    clock.now = 27
    plain.ended("silver.events", "succeeded", 180_000)
    assert out.getvalue().splitlines() == [
        "... silver.events: 3 batches, 120,000 rows so far, 11 s",
        "... silver.events: succeeded, 180,000 rows in 22 s",
    ]


def test_terminal_keeps_a_line_per_table_that_ended():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system=None)
    with Live(console=console, transient=True, auto_refresh=False) as live:
        watcher = TerminalProgress(live)
        watcher.started("bronze.events")
        watcher.progressed("bronze.events", 2, 600)
        watcher.ended("bronze.events", "succeeded", 900)
    assert "succeeded bronze.events: 900 rows in" in out.getvalue()


class _Recorder:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def started(self, table: str) -> None:
        self.events.append(("started", table))

    def progressed(self, table: str, batches: int, rows: int) -> None:
        self.events.append(("progressed", table, batches, rows))

    def ended(self, table: str, status: str, rows: int) -> None:
        self.events.append(("ended", table, status, rows))


@pytest.mark.slow
def test_a_run_tells_its_watchers_each_table_start_progress_and_end(spark, fresh_settings):
    s = fresh_settings
    generate(s.landing, rows=600, files=2, seed=8)
    with progress.watching(_Recorder()) as recorder:
        reports = run_pipeline(spark, s, default_registry(), ["bronze.events", "silver.events"])
    ends = [e for e in recorder.events if e[0] != "progressed"]
    assert ends == [
        ("started", "bronze.events"),
        ("ended", "bronze.events", "succeeded", reports[0].rows_in),
        ("started", "silver.events"),
        ("ended", "silver.events", "succeeded", reports[1].rows_in),
    ]
    for table, report in (("bronze.events", reports[0]), ("silver.events", reports[1])):
        rows = [e[3] for e in recorder.events if e[0] == "progressed" and e[1] == table]
        assert rows == sorted(rows) and all(r <= report.rows_in for r in rows)
    with progress.watching(recorder):
        again = run_pipeline(spark, s, default_registry(), ["bronze.events"])
    assert recorder.events[-1] == ("ended", "bronze.events", "skipped", 0) and again[0].skipped
