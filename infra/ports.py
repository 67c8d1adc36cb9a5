"""TCP ports on 127.0.0.1 for the servers Tributary starts (test broker, one-host cluster, tests' servers)."""

from __future__ import annotations

import socket
import subprocess
import time

from infra.errors import SetupError


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


def await_listening(process: subprocess.Popen, port: int, timeout: float, what: str, log: str) -> None:
    """Wait until `process` accepts connections on 127.0.0.1:`port`; SetupError naming `what` and its `log` if it
    exits first or does not listen within `timeout` seconds (then it is killed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SetupError(f"the {what} exited at start (code {process.returncode}); see {log}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    process.kill()
    raise SetupError(f"the {what} did not listen on 127.0.0.1:{port} within {timeout:.0f} s; see {log}")


def stop_process(process: subprocess.Popen, sig: int) -> None:
    """Send `sig` to a running `process` and wait for it to exit, killing it after 10 s."""
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
