"""The one place that builds the SparkSession and sets Spark configuration."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from infra import class_archive
from infra.catalog import delta_catalog_conf, pyiceberg_catalog, spark_catalog_conf
from infra.errors import ConfigError
from infra.executors import executor_problem, executor_wait
from infra.jars import DELTA_EXTENSION, ICEBERG_EXTENSION, spark_jars
from infra.java import require_java
from infra.jvm_stderr import without_start_notice
from infra.scratch import process_scratch
from infra.settings import Settings
from infra.spark_errors import start_failure
from infra.spark_functions import register_functions
from infra.spark_speed import import_short_named_classes, speed_conf

_WORKER_WARNINGS = "ignore:The behavior of DataFrame concatenation with empty or all-NA entries:FutureWarning"
_lock = threading.Lock()


@dataclass
class _Active:
    engine: tuple
    session: SparkSession
    catalogs: dict[str, dict[str, str]] = field(default_factory=dict)


_active: _Active | None = None
# Work to do in a background thread while this process's JVM starts (the start is mostly Java's, on another core).
_while_starting: list[Callable[[], object]] = []


def while_jvm_starts(task: Callable[[], object]) -> None:
    """Run `task` in a background thread when this process next starts its JVM, e.g. an import that the work
    after the start would otherwise wait for. A failing task is ignored: the work then does it itself."""
    if task not in _while_starting:
        _while_starting.append(task)


def _start_background_tasks() -> None:
    def quietly(task: Callable[[], object]) -> None:
        with contextlib.suppress(Exception):  # a warm-up only: whoever needs the result will raise it
            task()

    while _while_starting:
        threading.Thread(target=quietly, args=(_while_starting.pop(),), daemon=True).start()


def _engine(settings: Settings) -> tuple:
    """The settings that need a new JVM when they change; catalogs can be added to a running session."""
    return (
        settings.spark_master,
        settings.driver_memory,
        settings.shuffle_partitions,
        settings.spark_conf,
        settings.jar_cache,
        settings.uses_sqlite,
        settings.listen_address,
    )


def _is_wildcard(address: str) -> bool:
    """True for 0.0.0.0 / :: (every interface): an address to bind, never one to advertise."""
    try:
        return ipaddress.ip_address(address).is_unspecified
    except ValueError:
        return False


def _listen_conf(settings: Settings) -> dict[str, str]:
    """Bind the driver's RPC and block-manager ports to `settings.listen_address` and advertise it."""
    address = settings.listen_address
    if address is None:
        return {}
    conf = {"spark.driver.bindAddress": address}
    if not _is_wildcard(address):
        conf["spark.driver.host"] = address
    return conf


@contextmanager
def _launch_env(settings: Settings) -> Iterator[None]:
    """Set SPARK_LOCAL_IP while the JVM starts: Spark's UI binds to it (no config key), else to 0.0.0.0."""
    address = settings.listen_address
    if address is None or _is_wildcard(address):
        yield
        return
    previous = os.environ.get("SPARK_LOCAL_IP")
    os.environ["SPARK_LOCAL_IP"] = address
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("SPARK_LOCAL_IP", None)
        else:
            os.environ["SPARK_LOCAL_IP"] = previous


DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
# Spark 4 turns it on by default; Tributary turns it off for tables' functions (see `spark_conf`).
ANSI_MODE = "spark.sql.ansi.enabled"


# Spark's console logging, with failed tasks' stack traces sent to <home>/logs instead (see the file).
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")


def _driver_java_options(settings: Settings, archive: list[str], scratch: Path | None) -> str:
    return " ".join(
        [
            *([f"-Djava.io.tmpdir={scratch}"] if scratch is not None else []),
            f"-Dderby.system.home={settings.home / 'derby'}",
            f"-Dlog4j2.configurationFile={LOG_CONFIG}",
            f"-Dtributary.log.dir={settings.home / 'logs'}",
            *archive,
        ]
    )


def spark_conf(settings: Settings, scratch: Path | None = None) -> dict[str, str]:
    """Every Spark setting Tributary uses for `settings` (also used to launch the SQL server); the driver JVM's temp
    files, and so Spark's local folder (`spark.local.dir` falls back to it), go to `scratch` (`infra.scratch`)."""
    jars = spark_jars(settings)
    conf = {
        "spark.master": settings.spark_master,
        "spark.app.name": "tributary",
        "spark.jars": ",".join(str(j) for j in jars.jars),
        "spark.driver.extraClassPath": os.pathsep.join(str(j) for j in jars.driver_class_path),
        "spark.sql.extensions": ",".join((ICEBERG_EXTENSION, DELTA_EXTENSION)),
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        # Spark 4 turns ANSI mode on: a value a table's function cannot cast (or a division by zero, an overflow)
        # would stop the whole run, where Spark 3 gave NULL and the table's rules quarantined the row by name.
        # Tributary keeps the latter for tables' functions (docs/tables.md, "Bad values"); set
        # `spark.sql.ansi.enabled=true` in TRIBUTARY_SPARK_CONF to have such a value stop the run instead. Rules
        # are evaluated without ANSI either way, and landing parses never depend on it.
        ANSI_MODE: "false",
        "spark.driver.memory": settings.driver_memory,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.numRecentProgressUpdates": "1000",
        "spark.sql.adaptive.enabled": "true",
        # Parquet that Spark writes for Delta tables (pipelines/io/delta.py) must hold timestamps as INT64 microseconds,
        # which the Delta protocol requires (Spark's default is the legacy INT96); Iceberg writes its own Parquet.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        # Dates and times as they are (proleptic Gregorian, as Delta, Iceberg and delta-rs store them): Spark's
        # default refuses to write a year-1 timestamp at all, which would stop a Delta bronze table on one such value.
        "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
        "spark.sql.parquet.datetimeRebaseModeInRead": "CORRECTED",
        "spark.sql.parquet.int96RebaseModeInWrite": "CORRECTED",
        "spark.sql.parquet.int96RebaseModeInRead": "CORRECTED",
        "spark.sql.parquet.compression.codec": "zstd",
        # A JSON object or array landing under a string column is kept as Spark writes it back (numbers and
        # escapes normalized) on both read paths: Spark 4's file reader would keep the landed text instead, but
        # `from_json` (the line parse) ignores this setting, and the two paths must give the same rows.
        "spark.sql.json.enableExactStringParsing": "false",
        # delta-spark's session extension turns these on in every session it builds; said here, they are the
        # platform's own settings, which the read-only SQL server requires every client session to keep.
        "spark.sql.parquet.fieldId.read.enabled": "true",
        "spark.sql.parquet.fieldId.write.enabled": "true",
        **speed_conf(settings),
        # Tables are always catalog-qualified; nothing should land in a local Hive warehouse.
        "spark.sql.warehouse.dir": str(settings.home / "spark-warehouse"),
        DRIVER_JAVA_OPTIONS: _driver_java_options(settings, class_archive.use_options(settings), scratch),
    }
    conf.update(_listen_conf(settings))
    conf.update(settings.deployment.spark_conf())
    conf.update(spark_catalog_conf(settings))
    conf.update(delta_catalog_conf(settings))
    given = dict(settings.spark_conf)
    if DRIVER_JAVA_OPTIONS in given:  # added to Tributary's own (log settings, Derby's home, the class archive)
        given[DRIVER_JAVA_OPTIONS] = f"{conf[DRIVER_JAVA_OPTIONS]} {given[DRIVER_JAVA_OPTIONS]}".strip()
    conf.update(given)
    return conf


def get_spark(settings: Settings) -> SparkSession:
    """Return the process's SparkSession for `settings`, building it on first use.

    One JVM per process. Settings that differ only in their catalog (another catalog name, database and
    warehouse) register that catalog on the running session; anything else restarts the session. Folders that
    cannot be written and settings Spark rejects at start-up raise `ConfigError` naming the setting.
    """
    global _active
    settings.require_platform_writable()
    with _lock:
        catalog = spark_catalog_conf(settings)
        if _active is not None:
            alive = _active.session._jsc is not None
            known = _active.catalogs.get(settings.catalog_name)
            if alive and _active.engine == _engine(settings) and known in (None, catalog):
                if known is None:
                    _register_catalog(_active, settings, catalog)
                return _active.session
            _active.session.stop()
            _active = None
        require_java()
        # Python workers must run the interpreter that has pandas/pyarrow, not the system python3.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        # pandas 2 warns inside pyspark's own applyInPandasWithState serializer (not in a user's code), once per
        # batch, on the terminal; the Python workers inherit this filter from the JVM's environment.
        os.environ.setdefault("PYTHONWARNINGS", _WORKER_WARNINGS)
        pyiceberg_catalog(settings)  # creates the catalog tables before Spark connects
        settings.home.mkdir(parents=True, exist_ok=True)
        builder = SparkSession.builder
        for key, value in spark_conf(settings, process_scratch(settings.scratch).path).items():
            builder = builder.config(key, value)
        session = None
        _start_background_tasks()
        try:
            with _launch_env(settings), without_start_notice():
                session = builder.getOrCreate()
            # Builds the session state now, so Spark checks every spark.sql.* value at start-up, not mid-run.
            session.conf.get("spark.sql.session.timeZone")
        except (PySparkException, Py4JError) as exc:
            error = start_failure(settings, exc)
            if session is not None:
                session.stop()
            raise error from None
        session.sparkContext.setLogLevel("ERROR")
        import_short_named_classes(session)
        register_functions(session)
        if not settings.local_master:
            _check_cluster(session, settings)
        _active = _Active(_engine(settings), session, {settings.catalog_name: catalog})
        return session


def _check_cluster(session: SparkSession, settings: Settings) -> None:
    """Stop the session and raise `ConfigError` when the cluster's executors cannot run this platform's Python."""
    # Executors may be busy with another run's work: wait for them as long as for another run's table lock.
    wait = executor_wait(settings.lock_wait_seconds, settings.deployment.executor_wait_seconds)
    problem = executor_problem(session, settings.master, sys.executable, wait)
    if problem is not None:
        session.stop()
        raise ConfigError(problem)


def stop_spark() -> None:
    """Stop the process's SparkSession if one is running."""
    global _active
    with _lock:
        if _active is not None:
            _active.session.stop()
            _active = None


def _end_jvm(timeout: float) -> int | None:
    """Shut down the stopped session's JVM and wait for it to exit; its exit code (None if there was none)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return None
    process = getattr(gateway, "proc", None)
    gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if process is None:
        return None
    process.stdin.close()  # the JVM exits when its parent's pipe closes
    return process.wait(timeout)


def record_class_archive(settings: Settings, workload: Callable[[Settings], None]) -> Path | None:
    """Run `workload` in a JVM that writes the classes it loaded to the class archive when it exits
    (`infra.class_archive`); returns the archive, None if this JDK could not make one. Ends the process's JVM.

    `settings` should be a throw-away home: the workload runs there with the session this builds. An error of
    the workload is raised after the JVM has ended, with no archive written.
    """
    target = class_archive.archive_path(settings)
    if target.is_file():
        return target
    stop_spark()
    _end_jvm(60)
    target.parent.mkdir(parents=True, exist_ok=True)
    class_archive.remove_stale_candidates(target)
    candidate = class_archive.candidate_path(target)
    options = " ".join(class_archive.dump_options(candidate))  # added to the driver's own options (spark_conf)
    dumping = replace(settings, spark_conf=(*settings.spark_conf, (DRIVER_JAVA_OPTIONS, options)))
    try:
        workload(dumping)
        jvm = get_spark(dumping).sparkContext._jvm
        java_home, class_path = (jvm.System.getProperty(key) for key in ("java.home", "java.class.path"))
    except BaseException:
        stop_spark()
        _end_jvm(300)  # it writes the archive as it exits: wait, then delete it
        candidate.unlink(missing_ok=True)
        raise
    stop_spark()
    if _end_jvm(300) != 0:
        candidate.unlink(missing_ok=True)
        return None
    if not class_archive.promote(candidate, target, java_home, class_path):
        return None
    class_archive.remove_superseded(target)
    return target


# A SparkSession, a function that returns one (called only if the work needs a session), or None (the process's
# session for the settings, `get_spark`, started only if needed): runs and checks that find nothing to do start no JVM.
Session = SparkSession | Callable[[], SparkSession] | None


def running_session(session: Session) -> SparkSession | None:
    """The session `session` stands for if it is already running (None: read without Spark where possible)."""
    return session if isinstance(session, SparkSession) else None


def _register_catalog(active: _Active, settings: Settings, catalog: dict[str, str]) -> None:
    """Make the home's catalog known to the running session under its name (not as the default catalog)."""
    pyiceberg_catalog(settings)
    for key, value in catalog.items():
        if key != "spark.sql.defaultCatalog":
            active.session.conf.set(key, value)
    active.catalogs[settings.catalog_name] = catalog


def started_session(session: Session, settings: Settings) -> SparkSession:
    """The session `session` stands for, started now if need be. A running session of this process is given the
    home's catalog if it does not know it yet, so a table's name never resolves in another home's catalog."""
    if isinstance(session, SparkSession):
        with _lock:
            if _active is not None and _active.session is session and settings.catalog_name not in _active.catalogs:
                _register_catalog(_active, settings, spark_catalog_conf(settings))
        return session
    return session() if session is not None else get_spark(settings)
