"""Detect the Java runtime Spark needs."""

from __future__ import annotations

import re
import shutil
import subprocess

from infra.errors import SetupError

REQUIRED_MAJOR = 17


def java_major_version(java: str | None = None) -> int:
    """Return the major version of `java` (default: the one on PATH); raise SetupError if absent."""
    binary = java or shutil.which("java")
    if not binary:
        raise SetupError(
            "Java 17 is required but no 'java' is on PATH: install it with "
            "'apt-get install openjdk-17-jre-headless' (or set JAVA_HOME and PATH)"
        )
    try:
        out = subprocess.run([binary, "-version"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise SetupError(f"cannot run {binary!r} to check the Java version: {exc}") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        raise SetupError(f"cannot read the Java version from '{binary} -version': {out.stderr.strip()!r}")
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def require_java() -> int:
    """Raise SetupError unless Java 17 is the `java` on PATH."""
    major = java_major_version()
    if major != REQUIRED_MAJOR:
        raise SetupError(
            f"Java {REQUIRED_MAJOR} is required (Spark 4.1 with the Iceberg runtime), but 'java' on PATH is "
            f"Java {major}: install openjdk-17-jre-headless and put it first on PATH"
        )
    return major
