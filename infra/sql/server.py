"""The analysts' SQL endpoint: Spark's Thrift Server (HiveServer2 protocol, JDBC/ODBC) on 127.0.0.1.

The server ships with pyspark (SPARK_HOME is the installed `pyspark` package) and runs as its own JVM,
started with the platform's Spark settings (`infra.spark.spark_conf`) so it sees the Iceberg catalog.

Read-only mode (the default) holds against a hostile client (see docs/analysts.md, "Trust model"):

- the SQL guard extension (`infra/jvm`, `tributary.sql.ReadOnlyExtension`) refuses, before anything runs,
  every statement but queries, SHOW, DESCRIBE, EXPLAIN and USE; INSERT ... DIRECTORY, TRANSFORM ... USING,
  file-path relations (`csv.`/path``) and reflection functions; and any session whose configuration differs
  from the server's (connect-time `set:hiveconf:`/`set:hivevar:` overrides, SQL `SET` is refused anyway);
- `spark.sql.runSQLOnFiles=false`, and no Iceberg SQL extensions (`CALL` does not parse);
- the catalog database is opened read-only (SQLite `open_mode=1`, PostgreSQL `readOnly=true`).

Authentication: with TRIBUTARY_SQL_PASSWORD set, clients must send that password (HiveServer2 CUSTOM
authentication, `tributary.sql.SharedSecretAuthenticator`); without it, anyone who reaches the port connects.
Spark settings go to spark-submit in a properties file readable by the owner only (a PostgreSQL catalog URI
may carry a password), never on the command line; the password is read from the server's environment.

State lives in `<home>/sql-server/`: `server.pid` (JSON: pid, port, mode, auth, log), `server.log` and
`spark.properties`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

from infra.errors import ConfigError, SetupError
from infra.ports import port_free
from infra.scratch import claim
from infra.settings import Settings

DEFAULT_PORT = 10009
HOST = "127.0.0.1"
MAIN_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
# The JDBC URL's database must be a namespace of the catalog: Hive clients send `USE <database>` on connect
# and the lakehouse catalog has no `default` namespace.
DEFAULT_DATABASE = "gold"
PASSWORD_VARIABLE = "TRIBUTARY_SQL_PASSWORD"


@dataclass(frozen=True)
class ServerInfo:
    """A running (or just started) SQL server."""

    pid: int
    port: int
    read_only: bool
    log: str
    auth: str = "none"  # "password" when clients must send TRIBUTARY_SQL_PASSWORD

    @property
    def url(self) -> str:
        """JDBC URL for DBeaver, Superset (hive://) or beeline."""
        return jdbc_url(self.port)


def jdbc_url(port: int, database: str = DEFAULT_DATABASE) -> str:
    """`jdbc:hive2://127.0.0.1:<port>/<database>`."""
    return f"jdbc:hive2://{HOST}:{port}/{database}"


def sql_port(port: int | None = None) -> int:
    """The port: `port` if given, else TRIBUTARY_SQL_PORT, else 10009."""
    if port is None:
        raw = os.environ.get("TRIBUTARY_SQL_PORT", "") or str(DEFAULT_PORT)
        if not raw.isdigit():
            raise ConfigError(f"TRIBUTARY_SQL_PORT must be a port number, got {raw!r}")
        port = int(raw)
    if not 1 <= port <= 65535:
        raise ConfigError(f"SQL server port {port} is out of range 1-65535 (TRIBUTARY_SQL_PORT or --port)")
    return port


def state_dir(settings: Settings) -> Path:
    """`<home>/sql-server`: pid file and log."""
    return settings.home / "sql-server"


def pid_file(settings: Settings) -> Path:
    """The pid file of the home's SQL server."""
    return state_dir(settings) / "server.pid"


def log_file(settings: Settings) -> Path:
    """Where the server's output goes."""
    return state_dir(settings) / "server.log"


def sql_password() -> str | None:
    """The shared secret clients must send (TRIBUTARY_SQL_PASSWORD), or None for no authentication."""
    return os.environ.get(PASSWORD_VARIABLE) or None


def spark_home() -> Path:
    """The installed pyspark package folder, which carries bin/spark-submit and the Thrift Server jars."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise SetupError("pyspark is not installed in this environment: run 'make setup'")
    home = Path(spec.origin).parent
    if not (home / "bin" / "spark-submit").is_file():
        raise SetupError(f"{home / 'bin' / 'spark-submit'} is missing: reinstall pyspark (make setup)")
    return home


def read_only_catalog_uri(settings: Settings) -> str:
    """The catalog's JDBC URI with the connection opened read-only."""
    uri = settings.jdbc_catalog_uri
    base, _, query = uri.partition("?")
    params = dict(parse_qsl(query, keep_blank_values=True))
    if settings.uses_sqlite:
        params.pop("journal_mode", None)  # setting the journal mode is a write; WAL is already on the file
        params["open_mode"] = "1"  # SQLITE_OPEN_READONLY
    elif uri.startswith("jdbc:postgresql:"):
        params.update({"readOnly": "true", "readOnlyMode": "always"})
    else:
        raise ConfigError(
            f"read-only mode does not know how to open {base} read-only: start with --writable and point "
            "TRIBUTARY_CATALOG_URI at a database user that may only SELECT the catalog tables"
        )
    return f"{base}?{urlencode(params)}"


def server_conf(settings: Settings, read_only: bool = True, scratch: Path | None = None) -> dict[str, str]:
    """Spark settings of the server: the platform's (`spark_conf`), adjusted for a long-lived shared endpoint."""
    from infra.jars import DELTA_EXTENSION, SQL_GUARD_EXTENSION
    from infra.spark import spark_conf

    conf = spark_conf(settings, scratch)
    conf["spark.app.name"] = "tributary-sql-server"
    # Thrift sessions resolve the catalog in their own threads: the Iceberg and JDBC classes must be on the
    # driver's system class path, not only added through spark.jars (else NoClassDefFoundError JdbcCatalog$...).
    class_path = [conf["spark.jars"].replace(",", os.pathsep), conf.get("spark.driver.extraClassPath", "")]
    conf["spark.driver.extraClassPath"] = os.pathsep.join(p for p in class_path if p)
    if read_only:
        # The SQL guard replaces Iceberg's extensions: no CALL procedures; FOR VERSION AS OF is plain Spark SQL.
        # Delta's comes first so that the guard's parser wraps Delta's and refuses VACUUM, OPTIMIZE and the like.
        conf["spark.sql.extensions"] = f"{DELTA_EXTENSION},{SQL_GUARD_EXTENSION}"
        conf["spark.sql.runSQLOnFiles"] = "false"
        conf[f"spark.sql.catalog.{settings.catalog_name}.uri"] = read_only_catalog_uri(settings)
    return conf


def _properties(conf: dict[str, str]) -> str:
    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("\n", "\\n").replace(":", "\\:").replace("=", "\\=")

    return "".join(f"{escape(key)}={escape(value)}\n" for key, value in sorted(conf.items()))


def server_command(
    settings: Settings, port: int, read_only: bool = True, auth: bool = False, scratch: Path | None = None
) -> list[str]:
    """The spark-submit command line that runs the Thrift Server; writes its Spark settings to a 0600 file."""
    from infra.jars import SQL_GUARD_AUTHENTICATOR

    folder = state_dir(settings)
    folder.mkdir(parents=True, exist_ok=True)
    properties = folder / "spark.properties"
    properties.unlink(missing_ok=True)
    fd = os.open(properties, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(_properties(server_conf(settings, read_only, scratch)))
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--class", MAIN_CLASS, "--properties-file", str(properties)]
    hive = {"hive.server2.thrift.port": str(port), "hive.server2.thrift.bind.host": HOST}
    if auth:
        hive["hive.server2.authentication"] = "CUSTOM"
        hive["hive.server2.custom.authentication.class"] = SQL_GUARD_AUTHENTICATOR
    else:
        hive["hive.server2.authentication"] = "NONE"
    for key, value in hive.items():
        cmd += ["--hiveconf", f"{key}={value}"]
    return [*cmd, "spark-internal"]


def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)  # reap it if this process started it
        if done == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (OSError, IndexError):
        return True


def _is_server(pid: int) -> bool:
    """True if `pid` is a Thrift Server (guards against a pid reused by another program)."""
    try:
        return MAIN_CLASS.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return _alive(pid)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1):
            return True
    except OSError:
        return False


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    interesting = [line for line in text if "ERROR" in line or "Exception" in line] or text
    return "\n".join(interesting[-lines:])


def status(settings: Settings) -> ServerInfo | None:
    """The home's running SQL server, or None (a stale pid file is removed)."""
    path = pid_file(settings)
    try:
        info = ServerInfo(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    if _alive(info.pid) and _is_server(info.pid):
        return info
    path.unlink(missing_ok=True)
    return None


def start(settings: Settings, port: int | None = None, read_only: bool = True, timeout: float = 180.0) -> ServerInfo:
    """Start the Thrift Server in the background and return once it accepts connections.

    With TRIBUTARY_SQL_PASSWORD set, clients must send it as their password (any user name).

    Raises ConfigError if one already runs for this home or the port is taken, SetupError if it dies or does
    not come up within `timeout` seconds (with the end of its log).
    """
    from infra.catalog import pyiceberg_catalog
    from infra.java import require_java

    port = sql_port(port)
    running = status(settings)
    if running is not None:
        raise ConfigError(
            f"the SQL server of {settings.home} already runs (pid {running.pid}, {running.url}); "
            "stop it first with 'tributary sql-server stop'"
        )
    if not port_free(port):
        raise ConfigError(f"port {port} on {HOST} is in use: choose another with TRIBUTARY_SQL_PORT or --port")
    require_java()
    pyiceberg_catalog(settings)  # the catalog tables must exist: the server never creates them
    folder = state_dir(settings)
    folder.mkdir(parents=True, exist_ok=True)
    log = log_file(settings)
    if log.exists():
        log.replace(log.with_suffix(".log.1"))
    env = dict(os.environ, SPARK_HOME=str(spark_home()))
    if settings.spark_master.startswith("local"):
        env.setdefault("SPARK_LOCAL_IP", HOST)
    password = sql_password()
    scratch = claim(settings.scratch)  # owned by the server's JVM, which inherits the lock
    cmd = server_command(settings, port, read_only, auth=password is not None, scratch=scratch.path)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=folder,
            env=env,
            start_new_session=True,  # its own process group: stop() signals the JVM and nothing else
            pass_fds=(scratch.fd,),
        )
    scratch.release()
    auth = "password" if password else "none"
    info = ServerInfo(pid=proc.pid, port=port, read_only=read_only, log=str(log), auth=auth)
    pid_file(settings).write_text(json.dumps(asdict(info)))
    deadline = time.monotonic() + timeout
    while not _accepts(port):
        code = proc.poll()
        if code is not None:
            pid_file(settings).unlink(missing_ok=True)
            raise SetupError(f"the SQL server exited with code {code} while starting; see {log}:\n{_log_tail(log)}")
        if time.monotonic() > deadline:
            stop(settings)
            raise SetupError(
                f"the SQL server did not accept connections within {timeout:.0f} s; see {log}:\n{_log_tail(log)}"
            )
        time.sleep(0.5)
    return info


def stop(settings: Settings, timeout: float = 60.0) -> ServerInfo | None:
    """Stop the home's SQL server (SIGTERM, then SIGKILL after `timeout`); None if none was running."""
    info = status(settings)
    if info is None:
        return None
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(info.pid, sig)
        deadline = time.monotonic() + wait
        while _alive(info.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not _alive(info.pid):
            break
    deadline = time.monotonic() + 10
    while _accepts(info.port) and time.monotonic() < deadline:
        time.sleep(0.2)
    pid_file(settings).unlink(missing_ok=True)
    return info
