"""A readable Markdown report of the latest check result of every table, from the JSON the checks persist."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from infra.files import write_atomically
from infra.settings import Settings
from quality.results import CheckResult, load_results, results_dir


def report_path(settings: Settings) -> Path:
    """`<home>/reports/quality.md`."""
    return settings.home / "reports" / "quality.md"


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _status(result: CheckResult) -> str:
    if result.passed:
        return "passed"
    return "FAILED" if result.severity == "error" else "warning"


def render_report(results: list[CheckResult], source: Path | None = None) -> str:
    """Markdown: a summary table, then each check's expectations with counts, observed values and samples."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    lines = ["# Data quality report", "", f"Generated {now}" + (f" from `{source}`." if source else "."), ""]
    if not results:
        lines.append(
            "No check has run yet: materialize the assets (`tributary demo`) or run `tributary quality check`."
        )
        return "\n".join(lines) + "\n"
    failing = [r for r in results if not r.passed]
    lines += [
        f"**{len(results) - len(failing)} of {len(results)} checks passed**"
        + (f"; not passing: {', '.join(f'{r.table} {r.check}' for r in failing)}." if failing else "."),
        "",
        "| table | check | blocking | status | failed / evaluated | rows checked | checked at | seconds |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(
            f"| {r.table} | {r.check} | {'yes' if r.severity == 'error' else 'no'} | {_status(r)} | "
            f"{len(r.failed)} / {len(r.outcomes)} | {_cell(r.rows_checked)} | {r.checked_at} | {r.seconds} |"
        )
    for r in results:
        lines += ["", f"## {r.table} · {r.check} · {_status(r)}", ""]
        lines.append(
            f"Checked {r.checked_at} with {r.engine or 'spark'}; snapshot {r.snapshot_id or '-'}; "
            f"rows {r.rows_checked if r.rows_checked is not None else '-'}; {r.seconds} s."
            + (
                f" Carried over at {r.carried_over_at}: nothing it reads has changed since."
                if r.carried_over_at
                else ""
            )
        )
        lines += [
            "",
            "| | expectation | unexpected | % | observed | sample failing values |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for o in r.outcomes:
            pct = f"{o.unexpected_percent:.3g}" if o.unexpected_percent is not None else ""
            samples = ", ".join(map(str, o.samples)) if not o.success else ""
            observed = o.observed if o.error is None else f"{o.observed or ''} error: {o.error}"
            lines.append(
                f"| {'ok' if o.success else '**fail**'} | {_cell(o.name)} | {_cell(o.unexpected_count)} | {pct} | "
                f"{_cell(observed)} | {_cell(samples)} |"
            )
        for note in r.notes:
            lines.append(f"\n> {note}")
    return "\n".join(lines) + "\n"


def write_report(settings: Settings) -> Path:
    """Render the latest results under the home into `<home>/reports/quality.md` (atomically) and return its path."""
    target = report_path(settings)
    write_atomically(target, render_report(load_results(settings), results_dir(settings)))
    return target
