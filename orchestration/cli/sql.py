"""The analysts' commands: `tributary sql`, `tributary sql-server start|stop|status`, `tributary history`.

Nothing here imports pyspark, pyiceberg or pyarrow at module level: `tributary sql` starts in a fraction of a
second, and only `--engine spark` or `sql-server start` load Spark.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import sys
from collections.abc import Callable
from datetime import date, datetime, time
from decimal import Decimal
from typing import TYPE_CHECKING, TextIO

from infra.errors import TributaryError
from infra.settings import Settings

if TYPE_CHECKING:
    from infra.sql.local import QueryResult

FORMATS = ("table", "csv", "json")
PROMPT = "tributary> "
CONTINUATION = "       ..> "
SQL_KEYWORDS = (
    "SELECT", "FROM", "WHERE", "GROUP BY", "ORDER BY", "HAVING", "LIMIT", "JOIN", "LEFT JOIN", "ON", "USING",
    "WITH", "AS", "AND", "OR", "NOT", "IN", "BETWEEN", "LIKE", "IS NULL", "DISTINCT", "COUNT", "SUM", "AVG",
    "MIN", "MAX", "CASE", "WHEN", "THEN", "ELSE", "END", "UNION ALL", "DESC", "ASC", "SHOW TABLES", "DESCRIBE",
    "SHOW HISTORY", "DATE", "TIMESTAMP", "CAST",
)  # fmt: skip
HELP = """Statements end with ';'. Tables are namespace.table (gold.daily_revenue); TAB completes names.
  SHOW TABLES;               tables with row counts and last commit
  DESCRIBE gold.<table>;     columns and types
  SHOW HISTORY gold.<table>; snapshots (for --as-of time travel)
  SELECT ...;                any read-only query (DuckDB SQL)
  help, quit"""


# ------------------------------------------------------------------------------------------- output


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date | time | Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, default=_text)
    return str(value)


def _json(value: object) -> str:
    if isinstance(value, Decimal):
        return str(value) if value.is_finite() else json.dumps(str(value))  # exact, as a JSON number
    if isinstance(value, datetime | date | time):
        return json.dumps(value.isoformat())
    if isinstance(value, bytes):
        return json.dumps(value.hex())
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return "null"
    return json.dumps(value)


def _is_numeric(values: list[object]) -> bool:
    present = [v for v in values if v is not None]
    return bool(present) and all(isinstance(v, int | float | Decimal) and not isinstance(v, bool) for v in present)


def format_result(columns: tuple[str, ...], rows: list[tuple], fmt: str = "table") -> str:
    """Render rows as an aligned table (numbers right-aligned), CSV, or a JSON array of objects."""
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([_text(v) for v in row] for row in rows)
        return buf.getvalue()
    if fmt == "json":
        lines = [
            "{" + ", ".join(f"{json.dumps(c)}: {_json(v)}" for c, v in zip(columns, row, strict=True)) + "}"
            for row in rows
        ]
        return "[\n" + ",\n".join(lines) + "\n]\n" if lines else "[]\n"
    cells = [["NULL" if v is None else _text(v) for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    numeric = [_is_numeric([row[i] for row in rows]) for i in range(len(columns))]
    out = [" | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    out.append("-+-".join("-" * w for w in widths))
    for row in cells:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(row, widths, numeric, strict=True)]
        out.append(" | ".join(parts).rstrip())
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------- interactive


def _completer(names: Callable[[], list[str]]) -> Callable[[str, int], str | None]:
    """A readline completer over table names and SQL keywords."""
    matches: list[str] = []

    def complete(text: str, state: int) -> str | None:
        nonlocal matches
        if state == 0:
            lowered = text.lower()
            words = [*names(), *(k.lower() if text.islower() else k for k in SQL_KEYWORDS)]
            matches = sorted({w for w in words if w.lower().startswith(lowered)})
        return matches[state] if state < len(matches) else None

    return complete


def _setup_readline(settings: Settings, names: Callable[[], list[str]]) -> None:
    try:
        import readline
    except ImportError:  # not every Python has it; the prompt still works
        return
    import atexit

    readline.set_completer(_completer(names))
    readline.set_completer_delims(" \t\n(),;=<>+-*/'\"")  # keep '.': complete gold.daily_revenue as one word
    readline.parse_and_bind("tab: complete")
    history = settings.home / ".sql_history"
    with contextlib.suppress(OSError):
        readline.read_history_file(history)
    readline.set_history_length(1000)

    def save() -> None:
        with contextlib.suppress(OSError):
            readline.write_history_file(history)

    atexit.register(save)


def interactive(
    run: Callable[[str], QueryResult],
    names: Callable[[], list[str]],
    settings: Settings,
    fmt: str = "table",
    stdin: TextIO | None = None,
    out: TextIO | None = None,
) -> int:
    """Read statements ending in ';' and print their results until EOF or `quit`; errors do not end the session."""
    stdin = stdin or sys.stdin
    out = out or sys.stdout
    tty = stdin.isatty() and out.isatty()
    if tty:
        _setup_readline(settings, names)
        print(f"Tributary SQL on {settings.home} (read-only). 'help' for help, 'quit' to leave.", file=out)
    buffer: list[str] = []
    while True:
        try:
            if tty:
                line = input(CONTINUATION if buffer else PROMPT)
            else:
                line = stdin.readline()
                if not line:
                    raise EOFError
        except EOFError:
            if buffer:
                _run_one(run, " ".join(buffer), fmt, out)
            if tty:
                print(file=out)
            return 0
        except KeyboardInterrupt:
            buffer.clear()
            print(file=out)
            continue
        stripped = line.strip()
        if not buffer and stripped.rstrip(";").lower() in ("quit", "exit", r"\q"):
            return 0
        if not buffer and stripped.rstrip(";").lower() in ("help", r"\?", r"\h"):
            print(HELP, file=out)
            continue
        if not stripped:
            continue
        buffer.append(line.rstrip("\n"))
        if stripped.endswith(";"):
            _run_one(run, "\n".join(buffer), fmt, out)
            buffer.clear()


def _run_one(run: Callable[[str], QueryResult], sql: str, fmt: str, out: TextIO) -> None:
    statement = sql.strip().rstrip(";").strip()
    if not statement:
        return
    try:
        result = run(statement)
    except TributaryError as exc:
        print(f"error: {exc}", file=out)
        return
    out.write(format_result(result.columns, result.rows, fmt))
    out.flush()


# ---------------------------------------------------------------------------------------- handlers


def _sql(args: argparse.Namespace, settings: Settings) -> int:
    from infra.sql.local import CatalogReader, LocalEngine
    from infra.sql.query import run_query

    if args.query is not None:
        result = run_query(settings, args.query.strip().rstrip(";"), engine=args.engine, as_of=args.as_of)
        sys.stdout.write(format_result(result.columns, result.rows, args.format))
        return 0
    if args.engine == "spark":
        if args.as_of is not None:
            run_query(settings, "SELECT 1", engine="spark", as_of=args.as_of)  # raises the how-to message

        def run(sql: str) -> QueryResult:
            return run_query(settings, sql, engine="spark")

    else:
        run = LocalEngine(settings, as_of=args.as_of).query  # one DuckDB session for the whole prompt
    return interactive(run, CatalogReader(settings).tables, settings, args.format)


def _history(args: argparse.Namespace, settings: Settings) -> int:
    from infra.sql.local import history

    result = history(settings, args.table)
    sys.stdout.write(format_result(result.columns, result.rows, args.format))
    return 0


def _sql_server(args: argparse.Namespace, settings: Settings) -> int:
    from infra.sql import server as sql_server

    if args.action == "start":
        info = sql_server.start(settings, port=args.port, read_only=not args.writable, timeout=args.timeout)
        mode = "read-only" if info.read_only else "read-write"
        print(f"SQL server (Spark Thrift Server, {mode}) listening on {sql_server.HOST}:{info.port}, pid {info.pid}")
        print(f"JDBC URL: {info.url}")
        password = f' -p "${sql_server.PASSWORD_VARIABLE}"' if info.auth == "password" else ""
        print(f"beeline:  {sql_server.spark_home() / 'bin' / 'beeline'} -u {info.url} -n $USER{password}")
        print(f"log:      {info.log}")
        print("stop:     tributary sql-server stop")
        if info.auth == "password":
            print(f"auth:     password required ({sql_server.PASSWORD_VARIABLE}), any user name")
        else:
            print(
                f"warning:  no authentication: anyone who can connect to {sql_server.HOST}:{info.port} can read "
                f"every table; set {sql_server.PASSWORD_VARIABLE} to require a password",
                file=sys.stderr,
            )
        return 0
    if args.action == "stop":
        info = sql_server.stop(settings)
        if info is None:
            print(f"no SQL server runs for {settings.home}")
        else:
            print(f"stopped the SQL server (pid {info.pid}); port {info.port} is free")
        return 0
    info = sql_server.status(settings)
    if info is None:
        print(f"no SQL server runs for {settings.home}")
        return 1
    mode = "read-only" if info.read_only else "read-write"
    print(f"running ({mode}, auth: {info.auth}), pid {info.pid}, JDBC URL {info.url}, log {info.log}")
    return 0


def register(
    sub: argparse._SubParsersAction, handlers: dict[str, Callable[[argparse.Namespace, Settings], int]]
) -> None:
    """Add the `sql`, `sql-server` and `history` subcommands and their handlers."""
    sql = sub.add_parser(
        "sql",
        help="query tables with read-only SQL (DuckDB, no JVM); interactive without a query",
        description="Run a read-only query against the lakehouse tables, named like gold.daily_revenue. "
        "Without a query: an interactive prompt (SHOW TABLES; DESCRIBE <table>; TAB completes table names).",
    )
    sql.add_argument("query", nargs="?", help='e.g. "SELECT * FROM gold.daily_revenue LIMIT 10"')
    sql.add_argument("--format", choices=FORMATS, default="table")
    sql.add_argument(
        "--engine",
        choices=("duckdb", "spark"),
        default="duckdb",
        help="duckdb: local and fast (default); spark: Spark SQL, for what DuckDB cannot do (starts a JVM)",
    )
    sql.add_argument(
        "--as-of",
        metavar="SNAPSHOT_OR_TIME",
        help="time travel: a snapshot id or an ISO timestamp (see 'tributary history <table>')",
    )
    handlers["sql"] = _sql

    server = sub.add_parser(
        "sql-server",
        help="start/stop the JDBC/ODBC SQL endpoint (Spark Thrift Server) for BI tools",
        description="A HiveServer2 endpoint on 127.0.0.1 (port: --port, TRIBUTARY_SQL_PORT, default 10009).",
    )
    server.add_argument("action", choices=("start", "stop", "status"))
    server.add_argument("--port", type=int, default=None, help="default: $TRIBUTARY_SQL_PORT or 10009")
    server.add_argument(
        "--writable",
        action="store_true",
        help="allow writes (default: read-only: queries only, read-only catalog connection, no CALL procedures)",
    )
    server.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for the server to start")
    handlers["sql-server"] = _sql_server

    hist = sub.add_parser("history", help="list a table's snapshots: operation, commit time, row counts")
    hist.add_argument("table", help="e.g. gold.daily_revenue")
    hist.add_argument("--format", choices=FORMATS, default="table")
    handlers["history"] = _history
