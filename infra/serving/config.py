"""Serving settings: where served tables are published and how analysts log in.

- `TRIBUTARY_SERVE_URL`: publish into an existing PostgreSQL (`postgresql://user:password@host:port/db`); unset,
  the home's embedded server (`tributary serve start`) is used when it runs;
- `TRIBUTARY_PG_PORT`: the embedded server's port on 127.0.0.1 (default 5433);
- `TRIBUTARY_SQL_USER` (default `analyst`) and `TRIBUTARY_SQL_PASSWORD`: the analysts' read-only role;
  `TRIBUTARY_SQL_ALLOW_NO_PASSWORD=1` lets analysts in without a password (127.0.0.1 only, with a warning).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from infra.errors import ConfigError

DEFAULT_PORT = 5433
DEFAULT_ANALYST = "analyst"
SYNC_ROLE = "tributary_sync"
DATABASE = "tributary"
_ROLE_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")


@dataclass(frozen=True)
class ServeSettings:
    """How served tables are published and read."""

    url: str | None = field(default=None, repr=False)  # may carry a password
    port: int = DEFAULT_PORT
    analyst: str = DEFAULT_ANALYST
    password: str | None = field(default=None, repr=False)
    allow_no_password: bool = False

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> ServeSettings:
        """Read the settings; raise ConfigError naming a bad one."""
        env = os.environ if environ is None else environ
        url = env.get("TRIBUTARY_SERVE_URL") or None
        if url is not None:
            parts = urlsplit(url)
            if parts.scheme not in ("postgresql", "postgres") or not parts.hostname or not parts.path.strip("/"):
                raise ConfigError(
                    "TRIBUTARY_SERVE_URL is not a PostgreSQL URL with a database: use "
                    "postgresql://user:password@host:port/database"
                )
        port_text = env.get("TRIBUTARY_PG_PORT") or str(DEFAULT_PORT)
        if not (port_text.isascii() and port_text.isdigit()) or not 1 <= int(port_text) <= 65535:
            raise ConfigError(f"TRIBUTARY_PG_PORT must be a TCP port (1-65535), got {port_text!r}")
        analyst = env.get("TRIBUTARY_SQL_USER") or DEFAULT_ANALYST
        if not _ROLE_NAME.fullmatch(analyst) or analyst in (SYNC_ROLE, "postgres", "tributary"):
            raise ConfigError(
                f"TRIBUTARY_SQL_USER={analyst!r} cannot be the analysts' role: use lower-case letters, digits and _ "
                f"(starting with a letter), other than {SYNC_ROLE}, postgres and tributary"
            )
        allow = env.get("TRIBUTARY_SQL_ALLOW_NO_PASSWORD", "")
        if allow not in ("", "0", "1"):
            raise ConfigError(f"TRIBUTARY_SQL_ALLOW_NO_PASSWORD must be 1 or 0, got {allow!r}")
        return cls(
            url=url,
            port=int(port_text),
            analyst=analyst,
            password=env.get("TRIBUTARY_SQL_PASSWORD") or None,
            allow_no_password=allow == "1",
        )


# Where a home's server lives when the home is out of the server user's reach (a home under a private folder,
# such as a `mktemp -d` folder or root's home, both mode 0700, when root starts it): PostgreSQL runs as `postgres`,
# which must reach its data folder, and the user's folders are not loosened for it.
OUTSIDE_ROOT = Path("/var/lib/tributary/serve")


def outside_folder(home: Path) -> Path:
    """The folder the home's server uses outside the home: one per home, named after its path."""
    return OUTSIDE_ROOT / hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:16]


def serve_folder(home: Path) -> Path:
    """The embedded server's folder (its data in `postgres/`, its endpoint and passwords beside): `<home>/serve`,
    or `outside_folder(home)` once a server was started there (`server.start` decides)."""
    outside = outside_folder(home)
    return outside if outside.is_dir() else home / "serve"
