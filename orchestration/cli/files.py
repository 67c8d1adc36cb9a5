"""`tributary files list` (the recorded health of landed files) and `tributary files ack` (acknowledge a rejection).

A rejected landed file keeps the blocking asset check `landed_files` of its table failing until a person
acknowledges it here (after landing a fixed copy under a new name, or deciding its rows are not needed).
"""

from __future__ import annotations

import argparse
import getpass
import socket
from collections.abc import Callable

from infra.errors import TributaryError
from infra.settings import Settings

_COLUMNS = ("status", "review", "rows", "corrupt", "rescued", "file", "reason")


def _who() -> str:
    """The person acknowledging: login name and host (what a reviewer of the audit trail needs)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name for this uid (e.g. a container without a passwd entry)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def _list(args: argparse.Namespace, settings: Settings) -> int:
    from infra.spark import get_spark
    from pipelines.datasets import default_registry
    from pipelines.ops.file_review import file_rows, file_source_specs, require_file_source

    registry = default_registry()
    specs = [require_file_source(registry, args.table)] if args.table else file_source_specs(registry)
    spark = get_spark(settings)
    for index, spec in enumerate(specs):
        records = file_rows(spark, settings, spec, problems_only=args.problems)
        if index:
            print()
        what = "problem files" if args.problems else "landed files"
        if not records:
            print(f"{spec.name}: no {what} recorded in {spec.files_table}")
            continue
        unresolved = sum(1 for r in records if r.unresolved)
        counts = ", ".join(f"{n} {s}" for s, n in _status_counts(records).items())
        print(f"{spec.name}: {len(records)} {what} ({counts}; {unresolved} unresolved) from {spec.files_table}")
        rows = [
            (
                r.status,
                "UNRESOLVED" if r.unresolved else ("acknowledged" if r.acknowledgement else "-"),
                _cell(r.rows),
                _cell(r.corrupt_rows),
                _cell(r.rescued_rows),
                r.name,
                "; ".join(x for x in (r.reason, r.acknowledgement) if x) or "-",
            )
            for r in records
        ]
        widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(_COLUMNS[:-1])]
        for row in [_COLUMNS, *rows]:
            print("  " + "  ".join(f"{v:<{w}}" for v, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1])
        for r in records:
            if r.unresolved:
                print(f"  fix: land a fixed copy of {r.name} under a new name, then run '{r.ack_command()}'")
    return 0


def _status_counts(records: list) -> dict[str, int]:
    order = ("ok", "rejected", "empty", "header_only")
    counts: dict[str, int] = {}
    for status in sorted({r.status for r in records}, key=lambda x: (order.index(x) if x in order else len(order), x)):
        counts[status] = sum(1 for r in records if r.status == status)
    return counts


def _ack(args: argparse.Namespace, settings: Settings) -> int:
    from infra.spark import get_spark
    from pipelines.datasets import default_registry
    from pipelines.ops.file_review import acknowledge, require_file_source, unresolved

    spec = require_file_source(default_registry(), args.table)  # bad input fails before Spark starts
    spark = get_spark(settings)
    record = acknowledge(spark, settings, spec, args.file, args.note, _who())
    print(f"{spec.name}: landing file {record.name} acknowledged (it was rejected: {record.reason})")
    remaining = [r.name for r in unresolved(spark, settings, spec)]
    if remaining:
        print(f"{spec.name}: still unresolved: {', '.join(remaining)}")
    else:
        print(f"{spec.name}: no unresolved rejected files; its landed_files check passes at its next evaluation")
    return 0


def _files(args: argparse.Namespace, settings: Settings) -> int:
    handler = {"list": _list, "ack": _ack}.get(args.files_command)
    if handler is None:
        raise TributaryError("choose a files command: 'tributary files list' or 'tributary files ack TABLE FILE'")
    return handler(args, settings)


def register(
    sub: argparse._SubParsersAction, handlers: dict[str, Callable[[argparse.Namespace, Settings], int]]
) -> None:
    """Add the `files` command (`list`, `ack`) and its handler."""
    files = sub.add_parser("files", help="landed files per file-source table: their health, and acknowledgements")
    actions = files.add_subparsers(dest="files_command", required=True)
    listing = actions.add_parser("list", help="per landed file: status, rows, corrupt, rescued, reason")
    listing.add_argument("table", nargs="?", help="a file-source table such as bronze.events (default: all)")
    listing.add_argument("--problems", action="store_true", help="only rejected, empty and header-only files")
    ack = actions.add_parser("ack", help="acknowledge a rejected landed file (its blocking check then passes)")
    ack.add_argument("table", help="the file-source table, e.g. bronze.events")
    ack.add_argument("file", help="the landed file's name (or path), as named by the run or 'files list'")
    ack.add_argument("--note", help="why it is fine now, e.g. 'fixed copy landed as orders-0007b.json'")
    handlers["files"] = _files
