"""`tributary quarantine export`: the landed lines of quarantined rows, byte for byte, to fix and land again."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from infra.settings import Settings


def _export(args: argparse.Namespace, settings: Settings) -> int:
    from infra.spark import get_spark
    from pipelines.datasets import default_registry
    from pipelines.ops.quarantine_lines import export_landed_lines
    from pipelines.write.validate import ValidateDedupeSink

    registry = default_registry()
    table = args.table
    validated = next((s for s in registry if s.name == table and isinstance(s.sink, ValidateDedupeSink)), None)
    if validated is not None:  # the validated table names its quarantine
        table = validated.sink.quarantine_table
    spark = get_spark(settings)
    done = export_landed_lines(spark, settings, registry, table, Path(args.to), args.reason)
    which = f" that failed {args.reason}" if args.reason else ""
    lines = sum(done.lines.values())
    print(f"{table}: {lines} landed lines of {done.records} quarantined records{which}, in {len(done.lines)} files:")
    for name, count in sorted(done.lines.items()):
        print(f"  {done.folder / name}  {count} lines")
    if done.missing_files:
        print(f"  not found: {len(done.missing_files)} landed files are gone: {', '.join(done.missing_files[:5])}")
    if done.not_found:
        print(f"  {done.not_found} quarantined records were not found in their landed files (see docs/quality.md)")
    if lines:
        print("fix the lines, then land each file under a new name in its dataset's landing folder")
    return 0


def register(
    sub: argparse._SubParsersAction, handlers: dict[str, Callable[[argparse.Namespace, Settings], int]]
) -> None:
    """Add the `quarantine` command (`export`) and its handler."""
    quarantine = sub.add_parser("quarantine", help="rows a table's rules rejected: their landed lines")
    actions = quarantine.add_subparsers(dest="quarantine_command", required=True)
    export = actions.add_parser("export", help="write the exact landed lines of quarantined rows, per landed file")
    export.add_argument("table", help="a quarantine table such as silver.events_quarantine (or silver.events)")
    export.add_argument("--to", required=True, help="a new or empty folder for the lines (not a landing folder)")
    export.add_argument("--reason", help="only rows that failed this rule, e.g. order_is_priced")
    handlers["quarantine"] = _export
