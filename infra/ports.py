"""TCP ports on 127.0.0.1 for the servers Tributary starts (test broker, one-host cluster, tests' servers)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port nothing listens on now (127.0.0.1)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_free(port: int) -> bool:
    """True if nothing listens on 127.0.0.1:`port` and it can be bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As the JVM does: connections of a previous server lingering in TIME_WAIT do not block the port.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_or_free(port: int) -> int:
    """`port` when nothing listens on it on 127.0.0.1, else a free one."""
    return port if port_free(port) else free_port()
