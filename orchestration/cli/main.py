"""The `tributary` command line: set up, generate demo data, run pipelines, run the demo.

Every command reports a TributaryError as one clear line on stderr (exit 2), never a stack trace.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from infra.errors import TributaryError
from infra.settings import Settings

Handler = Callable[[argparse.Namespace, Settings], int]


def _setup(args: argparse.Namespace, settings: Settings) -> int:
    from infra.jars import fetch_all, fetch_jars, session_maven_jars, spark_jars
    from infra.java import require_java

    require_java()
    # The jars this home's sessions use; with --all every pinned jar (other catalogs' drivers too) and the S3 test
    # server, which `make demo-s3` and the S3 tests otherwise fetch when they first start it.
    fetched = (
        fetch_all(settings.jar_cache) if args.all else fetch_jars(session_maven_jars(settings), settings.jar_cache)
    )
    for jar in dict.fromkeys([*spark_jars(settings).jars, *fetched]):
        print(f"ok  {jar}")
    if args.all:
        from infra.s3_server import s3proxy_jars

        print(f"ok  {s3proxy_jars(settings.jar_cache)} (the S3 test server of the tests and 'make demo-s3')")
    if not (args.all or args.class_archive):
        return 0  # `make demo`'s set-up: the demo records the archive in the background when it ends
    try:
        archive = _class_archive(settings)
    except Exception as exc:  # an optimisation: set-up goes on without it, saying why
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        print(f"--  no class archive ({reason}): JVMs start without it", file=sys.stderr)
        return 0
    print(f"ok  {archive}" if archive else "--  no class archive: this JDK could not record one (JVMs start without)")
    return 0


def _class_archive(settings: Settings) -> Path | None:
    """The driver JVM's class archive (`infra.class_archive`), recorded once by running the demo tables on a few
    hundred rows in a throw-away home with a local, embedded catalog."""

    from infra.class_archive import archive_path

    recorded = archive_path(settings)
    if recorded.is_file():  # the common case: no pipeline imports, no JVM
        return recorded
    from infra.spark import get_spark, record_class_archive
    from pipelines.datasets import demo_registry, land_events
    from pipelines.run.pipeline import run_pipeline

    def workload(train: Settings) -> None:
        land_events(train.landing, rows=400, files=2, seed=7, progress=False)
        # The process's one JVM starts here, with the recording options: loading the datasets plans every table in
        # a session, which would otherwise start the JVM without them.
        spark = get_spark(train)
        run_pipeline(spark, train, demo_registry())

    print("recording the driver JVM's class archive (once per machine, about half a minute)", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="tributary-classes-") as tmp:
        home = Path(tmp)
        train = replace(settings.with_home(home), catalog_uri=None, spark_master="local[2]", shuffle_partitions=2)
        return record_class_archive(train, workload)


def _generate(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines.datasets import land_events

    settings.require_writable("landing")
    try:
        print(land_events(settings.landing, args.rows, args.files, args.seed, args.days))
    except (FileExistsError, ValueError) as exc:
        raise TributaryError(str(exc)) from exc
    return 0


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from orchestration.cli.progress import shown
    from orchestration.cli.summary import format_numbers, report_lines
    from pipelines.datasets import default_registry
    from pipelines.run.pipeline import run_pipeline
    from pipelines.run.summary import report_numbers

    registry = default_registry()
    tables = args.tables or None
    # No session yet: Spark starts with the first table that has something to do (a no-op run starts no JVM).
    with shown():
        reports = run_pipeline(None, settings, registry, tables, include_upstream=args.with_upstream)
    print(format_numbers(report_numbers(reports)))
    lines = report_lines(reports)
    if lines:
        print("\n" + "\n".join(lines))
    _serve_after_run(settings, registry, tables)
    return _sinks_after_run(settings, registry, reports if tables else None)


def _sinks_after_run(settings: Settings, registry, reports: list | None) -> int:
    """Deliver the sinks of the tables the run ran (every sink for a whole run); 1 when one failed."""
    from pipelines.deliver.run import run_sinks

    ran = None if reports is None else [r.table for r in reports]
    delivered, failures = run_sinks(None, settings, registry, ran)
    for report in delivered:
        if report.delivered:
            print(report.line())
    for failure in failures:
        print(f"tributary: error: the run committed its tables, but {failure}", file=sys.stderr)
    return 1 if failures else 0


def _serve_after_run(settings: Settings, registry, tables: list[str] | None) -> None:
    """Sync the served tables the run may have changed (every one for a whole run), when something serves them."""
    from pipelines.ops.serve import report_line, sync_served

    try:
        reports = sync_served(settings, registry, tables)
    except TributaryError as exc:
        raise TributaryError(f"the run committed its tables, but serving them failed: {exc}") from exc
    for report in reports:
        if report.changed:
            print(report_line(report))


def _infer(args: argparse.Namespace, settings: Settings) -> int:
    """Print the schema of the files landed for a dataset as code to paste into a spec."""
    from infra.spark import get_spark
    from pipelines.ops.infer.code import schema_code
    from pipelines.ops.infer.sample import choose_sample, dataset_folder
    from pipelines.ops.infer.schema import infer_schema

    folder = dataset_folder(settings.landing, args.dataset)
    choose_sample(folder, args.format, args.sample_files)  # a missing, empty or mixed folder fails before Spark
    spark = get_spark(settings)
    inferred = infer_schema(spark, folder, args.format, args.sample_files, args.sample_rows, scratch=settings.home)
    print(schema_code(inferred))
    return 0


def _positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return int(text)


def _query(args: argparse.Namespace, settings: Settings) -> int:
    from infra.spark import get_spark
    from infra.sql.spark_engine import home_session

    home_session(get_spark(settings), settings).sql(args.sql).show(args.limit, truncate=False)
    return 0


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Handler]]:
    """The argument parser and the handler of each subcommand."""
    parser = argparse.ArgumentParser(prog="tributary", description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, help="data folder (default: $TRIBUTARY_HOME or ./.tributary)")
    sub = parser.add_subparsers(dest="command", required=True)
    handlers: dict[str, Handler] = {}

    setup = sub.add_parser("setup", help="check Java 17 and assemble the Spark jars")
    setup.add_argument(
        "--all", action="store_true", help="every pinned jar, the S3 test server, the class archive (make setup-full)"
    )
    setup.add_argument("--class-archive", action="store_true", help="record the driver JVM's class archive too")
    handlers["setup"] = _setup

    gen = sub.add_parser("generate", help="land deterministic demo e-commerce events")
    gen.add_argument("--rows", type=int, default=100_000)
    gen.add_argument("--files", type=int, default=20)
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--days", type=int, default=3)
    handlers["generate"] = _generate

    run = sub.add_parser("run", help="run tables incrementally (default: all, upstream first)")
    run.add_argument("tables", nargs="*", help="table names such as silver.events")
    run.add_argument(
        "--with-upstream",
        action="store_true",
        help="first run every table the named tables read (transitively), in registry order, each once",
    )
    handlers["run"] = _run

    infer = sub.add_parser("infer", help="print the schema of a dataset's landed files as code for a spec")
    infer.add_argument("dataset", help="folder under the landing root, e.g. events")
    infer.add_argument("--format", choices=("json", "csv", "parquet"), help="default: from the file names")
    infer.add_argument("--sample-files", type=_positive_int, default=20, help="files to sample (default 20)")
    infer.add_argument("--sample-rows", type=_positive_int, default=10_000, help="records to sample (default 10000)")
    handlers["infer"] = _infer

    from orchestration.cli.demo import register as register_demo

    register_demo(sub, handlers)  # demo

    query = sub.add_parser("query", help="run one Spark SQL query against the catalog")
    query.add_argument("sql")
    query.add_argument("--limit", type=int, default=50)
    handlers["query"] = _query

    from orchestration.cli.sql import register as register_sql

    register_sql(sub, handlers)  # sql, sql-server, history

    from orchestration.cli.quality import register as register_quality

    register_quality(sub, handlers)  # quality report, quality check

    from orchestration.cli.files import register as register_files

    register_files(sub, handlers)  # files list, files ack

    from orchestration.cli.quarantine import register as register_quarantine

    register_quarantine(sub, handlers)  # quarantine export

    from orchestration.cli.unit import register as register_unit

    register_unit(sub, handlers)  # test

    from orchestration.cli.validate import register as register_validate

    register_validate(sub, handlers)  # validate

    from orchestration.cli.tables import register as register_tables

    register_tables(sub, handlers)  # tables

    from orchestration.cli.repair import register as register_repair

    register_repair(sub, handlers)  # reprocess, refresh

    from orchestration.cli.catalog import register as register_catalog

    register_catalog(sub, handlers)  # catalog migrate

    from orchestration.cli.cluster import register as register_cluster

    register_cluster(sub, handlers)  # cluster up, cluster down, cluster status

    from orchestration.cli.serve import register as register_serve

    register_serve(sub, handlers)  # serve start, stop, status, sync, refresh

    from orchestration.cli.state import register as register_state

    register_state(sub, handlers)  # state

    from orchestration.cli.ui import register as register_ui

    register_ui(sub, handlers)  # ui
    return parser, handlers


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `tributary` console script."""
    parser, handlers = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env(home=args.home)
        return handlers[args.command](args, settings)
    except TributaryError as exc:
        print(f"tributary: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
