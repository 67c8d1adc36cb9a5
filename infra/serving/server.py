"""The home's serving PostgreSQL (`tributary serve start|stop|status`), its roles, and connections to it.

The server is Debian's PostgreSQL (`infra.deploy.postgres`), data in `<home>/serve/postgres` (outside the home when
the server's user cannot reach it, `config.outside_folder`), listening on 127.0.0.1 only (no Unix socket). Three roles:

- `tributary`, the superuser made by initdb, used only here to set the others up (password in
  `serve/postgres.password`, readable by its owner only);
- `tributary_sync`, owner of the serving database and of every served table: the sync writes as it (password in
  `serve/sync.password`);
- the analysts' role (`TRIBUTARY_SQL_USER`, default `analyst`): CONNECT to the serving database, USAGE on the
  served schemas and SELECT on their tables, nothing else (no TEMP, no CREATE, no other database), and its
  transactions are read-only by default. Its password is `TRIBUTARY_SQL_PASSWORD`, set again at every start.

With `TRIBUTARY_SERVE_URL`, tables are published into that database instead and nothing here starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from infra.deploy import postgres
from infra.errors import ConfigError, SetupError, first_line
from infra.serving.config import DATABASE, SYNC_ROLE, ServeSettings, outside_folder, serve_folder

if TYPE_CHECKING:
    from psycopg2.extensions import connection as Connection

_ENDPOINT = "endpoint.json"
_SYNC_SECRET = "sync.password"
_HBA_BEGIN, _HBA_END = "# tributary: analysts without a password (begin)", "# tributary: (end)"


@dataclass(frozen=True)
class Endpoint:
    """Where the serving database is: host, port, database, and the analysts' role."""

    host: str
    port: int
    database: str
    analyst: str

    def analyst_url(self, password: str | None) -> str:
        """The analysts' SQLAlchemy-style URL (`postgresql://analyst:...@127.0.0.1:5433/tributary`)."""
        secret = f":{password}" if password else ""
        return f"postgresql://{self.analyst}{secret}@{self.host}:{self.port}/{self.database}"


def _reachable_by_server_user(folder: Path) -> bool:
    if os.geteuid() != 0:
        return True
    probe = subprocess.run(["runuser", "-u", postgres.SERVER_USER, "--", "test", "-x", str(folder)], check=False)
    return probe.returncode == 0


def _server_folder(home: Path) -> Path:
    """Where the home's server keeps its data: where it already is, else in the home when the server's user can
    reach it there, else outside the home (`config.outside_folder`), made for it."""
    folder = serve_folder(home)
    if (folder / "postgres" / "PG_VERSION").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o711)  # the server's user must reach its data folder inside; nothing here is listed to others
    if _reachable_by_server_user(folder):
        return folder
    outside = outside_folder(home)
    outside.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    outside.mkdir(mode=0o711, exist_ok=True)
    if not _reachable_by_server_user(outside):
        raise SetupError(
            f"the serving server runs as the '{postgres.SERVER_USER}' user, which cannot reach {folder} nor "
            f"{outside}: let it through every parent folder of one of them (chmod o+x)"
        )
    return outside


def _admin(folder: Path, port: int, database: str = "postgres") -> Connection:
    import psycopg2

    password = (folder / "postgres.password").read_text().strip()
    return psycopg2.connect(
        host="127.0.0.1", port=port, user=postgres.ROLE, password=password, dbname=database, connect_timeout=10
    )


def start(home: Path, serve: ServeSettings) -> Endpoint:
    """Start the home's serving server (initialised on first use) and set its roles up; a running one is kept."""
    if serve.url:
        raise ConfigError(
            "TRIBUTARY_SERVE_URL is set: tables are published into that database, so there is no server to start "
            "(unset it to use the home's own server)"
        )
    if not serve.password and not serve.allow_no_password:
        raise ConfigError(
            "TRIBUTARY_SQL_PASSWORD is not set: analysts log in with it. Set it, or set "
            "TRIBUTARY_SQL_ALLOW_NO_PASSWORD=1 to let anyone on this machine read the served tables without one"
        )
    folder = _server_folder(home)
    port = serve.port
    if postgres.running(folder):
        port = endpoint(home).port if endpoint(home) else port
    else:
        postgres.start(folder, port, databases=(DATABASE,))
    sync_password = postgres.secret_file(folder / _SYNC_SECRET)
    _set_up_roles(folder, port, serve, sync_password)
    _allow_without_password(folder, port, serve)
    found = Endpoint("127.0.0.1", port, DATABASE, serve.analyst)
    record = folder / _ENDPOINT
    record.write_text(json.dumps({"host": found.host, "port": port, "database": DATABASE, "analyst": serve.analyst}))
    return found


def _set_up_roles(folder: Path, port: int, serve: ServeSettings, sync_password: str) -> None:
    admin = _admin(folder, port)
    try:
        admin.autocommit = True
        with admin.cursor() as cur:
            for role, password in ((SYNC_ROLE, sync_password), (serve.analyst, serve.password)):
                cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,))
                verb = "ALTER" if cur.fetchone() else "CREATE"
                # Role names are checked identifiers (`ServeSettings`), the password a bound parameter.
                cur.execute(
                    f'{verb} ROLE "{role}" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS '
                    "PASSWORD %s",
                    (password,),
                )
            cur.execute(f'ALTER DATABASE "{DATABASE}" OWNER TO "{SYNC_ROLE}"')
            # Times are shown in UTC, as Spark and `tributary sql` show them in Tributary.
            cur.execute(f"ALTER DATABASE \"{DATABASE}\" SET timezone = 'UTC'")
            for database in (DATABASE, "postgres", "template1"):
                cur.execute(f'REVOKE ALL ON DATABASE "{database}" FROM PUBLIC')
            cur.execute(f'GRANT CONNECT ON DATABASE "{DATABASE}" TO "{serve.analyst}"')
            cur.execute(f'ALTER ROLE "{serve.analyst}" SET default_transaction_read_only = on')
    finally:
        admin.close()
    served = _admin(folder, port, DATABASE)
    try:
        served.autocommit = True
        with served.cursor() as cur:
            cur.execute("REVOKE ALL ON SCHEMA public FROM PUBLIC")
            cur.execute(f'ALTER SCHEMA public OWNER TO "{SYNC_ROLE}"')
    finally:
        served.close()


def _allow_without_password(folder: Path, port: int, serve: ServeSettings) -> None:
    """Keep pg_hba.conf's trust line for the analysts in step with the settings, and reload the server."""
    hba = folder / "postgres" / "pg_hba.conf"
    text = hba.read_text()
    if _HBA_BEGIN in text:
        head, _, rest = text.partition(_HBA_BEGIN)
        text = head + rest.partition(_HBA_END)[2].lstrip("\n")
    trusted = not serve.password and serve.allow_no_password
    if trusted:
        print(
            f"warning: analysts ({serve.analyst}) log in without a password (TRIBUTARY_SQL_ALLOW_NO_PASSWORD=1): "
            "anyone on this machine can read the served tables",
            file=sys.stderr,
        )
        line = f"host {DATABASE} {serve.analyst} 127.0.0.1/32 trust"
        text = f"{_HBA_BEGIN}\n{line}\n{_HBA_END}\n{text}"
    hba.write_text(text)
    admin = _admin(folder, port)
    try:
        with admin.cursor() as cur:
            cur.execute("SELECT pg_reload_conf()")
    finally:
        admin.close()


def stop(home: Path) -> bool:
    """Stop the home's serving server; whether one was running."""
    return postgres.stop(serve_folder(home))


def endpoint(home: Path) -> Endpoint | None:
    """The home's serving server as last started (None when it never was)."""
    record = serve_folder(home) / _ENDPOINT
    if not record.is_file():
        return None
    data = json.loads(record.read_text())
    return Endpoint(data["host"], int(data["port"]), data["database"], data["analyst"])


def running(home: Path) -> bool:
    """Whether the home's serving server runs."""
    return postgres.running(serve_folder(home))


def sync_connection(home: Path, serve: ServeSettings) -> Connection | None:
    """A connection as the sync role to where served tables are published; None when nothing serves them (no
    `TRIBUTARY_SERVE_URL`, and the home's server is not running)."""
    found = None if serve.url else endpoint(home)
    if not serve.url and (found is None or not running(home)):
        return None  # the common case of a home that serves nothing: no driver import, no connection
    import psycopg2

    if serve.url:
        parts = urlsplit(serve.url)
        try:
            return psycopg2.connect(
                host=parts.hostname,
                port=parts.port or 5432,
                user=unquote(parts.username or ""),
                password=unquote(parts.password or ""),
                dbname=parts.path.strip("/"),
                connect_timeout=10,
            )
        except psycopg2.OperationalError as exc:
            where = f"{parts.hostname}:{parts.port or 5432}{parts.path}"
            raise ConfigError(f"cannot reach TRIBUTARY_SERVE_URL ({where}): {first_line(exc)}") from None
    assert found is not None
    password = (serve_folder(home) / _SYNC_SECRET).read_text().strip()
    try:
        return psycopg2.connect(
            host=found.host, port=found.port, user=SYNC_ROLE, password=password, dbname=found.database,
            connect_timeout=10,
        )  # fmt: skip
    except psycopg2.OperationalError as exc:
        raise SetupError(
            f"the serving server of {home} does not answer on port {found.port} ({first_line(exc)}): "
            "run 'tributary serve stop' then 'tributary serve start'"
        ) from None
