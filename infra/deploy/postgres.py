"""A PostgreSQL server on 127.0.0.1 for the one-host cluster (`tributary cluster up`), from Debian's `postgresql`.

It holds the Iceberg catalog and the Dagster instance of the cluster profile. The server listens on 127.0.0.1
only (no Unix socket), requires a password (generated once, kept in the cluster folder, readable by its owner
only) and keeps its data in `<cluster folder>/postgres`. PostgreSQL refuses to run as root: started by root, it
runs as the `postgres` user that Debian's package creates.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from infra.errors import SetupError

SERVER_USER = "postgres"
ROLE = "tributary"
DATABASES = ("tributary", "dagster")


@dataclass(frozen=True)
class Postgres:
    """How to reach the server: port on 127.0.0.1, role and its password."""

    port: int
    password: str

    def url(self, database: str) -> str:
        """SQLAlchemy URL (psycopg2) of `database`."""
        return f"postgresql+psycopg2://{ROLE}:{self.password}@127.0.0.1:{self.port}/{database}"

    def jdbc(self, database: str) -> str:
        """JDBC URL of `database`, credentials included (what the Iceberg JDBC catalog takes)."""
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{database}?user={ROLE}&password={self.password}"


def binaries() -> Path:
    """The folder of the newest installed PostgreSQL server's programs."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parent.parent.name))
    if not found:
        raise SetupError(
            "PostgreSQL's server is not installed: run 'make setup-full' (or 'apt-get install postgresql')"
        )
    return found[-1].parent


def _as_server_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    try:
        pwd.getpwnam(SERVER_USER)
    except KeyError:
        raise SetupError(
            "PostgreSQL cannot run as root and there is no 'postgres' user: reinstall postgresql"
        ) from None
    return ["runuser", "-u", SERVER_USER, "--", *command]


def _run(command: list[str], what: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(_as_server_user(command), capture_output=True, text=True, env=env, timeout=120)
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise SetupError(f"PostgreSQL {what} failed: {said[-1] if said else f'exit {done.returncode}'}")
    return done.stdout


def _hand_to_server_user(path: Path) -> None:
    if os.geteuid() == 0:
        entry = pwd.getpwnam(SERVER_USER)
        shutil.chown(path, entry.pw_uid, entry.pw_gid)


def secret_file(path: Path) -> str:
    """The password kept in `path`, generated on first use into a file only its owner can read."""
    if not path.is_file():
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(secrets.token_hex(16))
    return path.read_text().strip()


def start(folder: Path, port: int, databases: tuple[str, ...] = DATABASES) -> Postgres:
    """Initialise (once) and start the server with its data in `folder/postgres`; create `databases`."""
    data = folder / "postgres"
    server = Postgres(port, secret_file(folder / "postgres.password"))
    bin_dir = binaries()
    if not (data / "PG_VERSION").is_file():
        data.mkdir(mode=0o700, exist_ok=True)
        _hand_to_server_user(data)
        with tempfile.NamedTemporaryFile("w", suffix=".pw") as pwfile:
            pwfile.write(server.password)
            pwfile.flush()
            _hand_to_server_user(Path(pwfile.name))
            command = [str(bin_dir / "initdb"), "-D", str(data), "-U", ROLE, "--pwfile", pwfile.name]
            _run([*command, "--auth=scram-sha-256", "--encoding=UTF8", "--no-locale"], "initdb")
    options = f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories=''"
    log = data / "server.log"
    _run([str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60", "start"], "start")
    for database in databases:
        _create_database(server, database)
    return server


def _create_database(server: Postgres, database: str) -> None:
    import psycopg2

    connection = psycopg2.connect(
        host="127.0.0.1", port=server.port, user=ROLE, password=server.password, dbname="postgres"
    )
    try:
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
            if cursor.fetchone() is None:
                cursor.execute(f'CREATE DATABASE "{database}"')  # a constant of this module, not user text
    finally:
        connection.close()


def running(folder: Path) -> bool:
    """Whether a server started from `folder/postgres` is running (asked of pg_ctl: a pid file left by a crash
    or a restart of the machine does not count)."""
    data = folder / "postgres"
    if not (data / "postmaster.pid").is_file():
        return False
    status = subprocess.run(
        _as_server_user([str(binaries() / "pg_ctl"), "-D", str(data), "status"]), capture_output=True, timeout=30
    )
    return status.returncode == 0


def stop(folder: Path) -> bool:
    """Stop the server of `folder/postgres` (fast: open sessions are ended); whether one was running."""
    data = folder / "postgres"
    if not running(folder):
        return False
    _run([str(binaries() / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "-t", "60", "stop"], "stop")
    return True
