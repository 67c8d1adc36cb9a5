"""The driver JVM's standard error without the notice every Spark 4 JVM prints when it starts.

Spark 4's launcher adds `--add-modules=jdk.incubator.vector` to every JVM it starts (no setting turns it off), and
the JVM answers with "WARNING: Using incubator modules: jdk.incubator.vector" on its standard error: on the
terminal of every `tributary` command, before a run's first line or an error's only line. The JVM inherits its
standard error when PySpark starts it, so while it starts, file descriptor 2 is a pipe whose reader forwards
everything to the real standard error except that notice, for as long as the JVM (and the Python workers it
starts, which inherit it) writes to it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator

NOTICES = (b"WARNING: Using incubator modules: jdk.incubator.vector",)


def _forward(source: int, target: int) -> None:
    with os.fdopen(source, "rb", buffering=0) as pipe:
        pending = b""
        while chunk := pipe.read(65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            kept = b"".join(line + b"\n" for line in lines if line.rstrip(b"\r") not in NOTICES)
            if kept:
                with contextlib.suppress(OSError):
                    os.write(target, kept)
        if pending and pending not in NOTICES:
            with contextlib.suppress(OSError):
                os.write(target, pending)
    os.close(target)


@contextlib.contextmanager
def without_start_notice() -> Iterator[None]:
    """Child processes started inside this block write their standard error through a filter that drops the
    JVM's start-up notice; this process's own standard error is unchanged once the block ends."""
    try:
        sys.stderr.flush()
        os.fstat(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    read_end, write_end = os.pipe()
    real = os.dup(2)
    threading.Thread(target=_forward, args=(read_end, os.dup(real)), name="jvm-stderr", daemon=True).start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(real, 2)
        os.close(real)
