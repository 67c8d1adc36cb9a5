"""A Kafka-protocol test broker on 127.0.0.1 for the tests, the Kafka demo and the benchmark.

It is `noida-db` (PyPI, `noida-db start --only kafka`): one process, file-backed, small data only; not a
production broker. Production points `TRIBUTARY_KAFKA_BOOTSTRAP` at a real cluster (docs/kafka.md).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from infra.errors import SetupError
from infra.ports import await_listening, free_port, stop_process


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
        stop_process(self.process, signal.SIGINT)


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
    await_listening(process, port, timeout, "Kafka test broker", log.name)
    return Broker(process, port, data_dir)
