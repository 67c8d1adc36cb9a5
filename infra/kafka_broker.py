"""A Kafka-protocol test broker on 127.0.0.1 for the tests, the Kafka demo and the benchmark.

It is `noida-db` (PyPI, `noida-db start --only kafka`): one process, file-backed, small data only; not a
production broker. Production points `TRIBUTARY_KAFKA_BOOTSTRAP` at a real cluster (docs/kafka.md).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from infra.errors import SetupError
from infra.ports import free_port


@dataclass(frozen=True)
class Broker:
    """A running test broker: its process and its bootstrap address."""

    process: subprocess.Popen
    port: int
    data_dir: Path

    @property
    def bootstrap(self) -> str:
        """`127.0.0.1:<port>`."""
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        """Stop the broker and wait for it to exit."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def start_broker(data_dir: Path, port: int | None = None, timeout: float = 30.0) -> Broker:
    """Start the test broker with its data under `data_dir` and wait until it accepts connections."""
    binary = Path(sys.executable).with_name("noida-db")
    if not binary.is_file():
        raise SetupError("the Kafka test broker (noida-db) is not installed in this environment: run 'make setup'")
    port = port or free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    log = (data_dir / "broker.log").open("ab")
    command = [str(binary), "start", "--only", "kafka", "--kafka-port", str(port), "--data-dir", str(data_dir)]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SetupError(f"the Kafka test broker exited at start (code {process.returncode}); see {log.name}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return Broker(process, port, data_dir)
        time.sleep(0.1)
    process.kill()
    raise SetupError(f"the Kafka test broker did not listen on 127.0.0.1:{port} within {timeout:.0f} s; see {log.name}")
