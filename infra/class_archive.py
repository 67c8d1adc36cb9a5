"""A class-data-sharing (AppCDS) archive of the classes a Tributary driver JVM loads, so every JVM starts faster.

A JVM started with `-XX:SharedArchiveFile` maps the classes it would otherwise read, verify and link from the
Spark, Hadoop, Parquet and Iceberg jars one by one. `tributary setup` records the archive once per machine by
running a small pipeline in a JVM started with `-XX:ArchiveClassesAtExit` (`infra.spark.record_class_archive`);
measured here, the first `tributary run` of every table on a 2,000-row file took 17.9-18.1 s with it against
21.0-21.9 s without (three runs each).

Two JVM behaviours shape this module: an archive for another class path or JDK build is refused with a warning
(silenced: the JVM then just starts without it), and a truncated archive crashes the JVM. So the archive is
named after the JDK and pyspark it was made for, written under a temporary name, mapped once with
`-Xshare:on -XX:+VerifySharedSpaces` (which fails on any damage) and only then renamed into place. Deleting
the file is always safe: JVMs start without it until the next `tributary setup`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
from pathlib import Path

from infra.settings import Settings

log = logging.getLogger(__name__)

# CDS messages (an archive made for another class path, classes skipped while dumping) are not the user's business.
QUIET = "-Xlog:cds*=off"


def _java_identity() -> str:
    """The JDK Spark launches (`$JAVA_HOME/bin/java`, else `java` on PATH, as spark-class picks it) as a file: a JDK
    upgraded in place gets a new key."""
    java_home = os.environ.get("JAVA_HOME")
    home_java = Path(java_home) / "bin" / "java" if java_home else None
    binary = str(home_java) if home_java is not None and home_java.is_file() else shutil.which("java")
    if binary is None:
        return "no-java"
    real = Path(binary).resolve()
    libjvm = real.parent.parent / "lib" / "server" / "libjvm.so"
    marker = libjvm if libjvm.is_file() else real
    stat = marker.stat()
    return f"{marker}:{stat.st_size}:{stat.st_mtime_ns}"


def _jar_folder() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _spark_identity() -> str:
    """pyspark's jars as the JVM checks them before mapping an archive: name, size and modification time of each.
    pyspark reinstalled at the same path (a new venv) gets a new key, where the old archive would be refused."""
    jars = _jar_folder()
    stats = [(p.name, p.stat()) for p in sorted(jars.glob("*.jar"))] if jars.is_dir() else []
    return ",".join(f"{name}:{stat.st_size}:{stat.st_mtime_ns}" for name, stat in stats)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def archive_path(settings: Settings) -> Path:
    """Where the archive for this JDK and this pyspark install lives (in the jar cache, outside git): named after
    the jar folder, then after the JDK and the jars' identity."""
    from infra.jars import S3_JARS  # on every driver's class path, before pyspark's jars

    driver_jars = ",".join(jar.file_name for jar in S3_JARS)
    key = _digest(f"{_java_identity()}\n{_spark_identity()}\n{driver_jars}")
    return settings.jar_cache / f"driver-classes-{_digest(str(_jar_folder()))}-{key}.jsa"


def remove_superseded(target: Path) -> list[Path]:
    """Delete archives made for this jar folder before its JDK or jars changed (no JVM would map them again) and
    archives named the way earlier versions named them; returns them. A JVM mapping one keeps its mapping."""
    folder = target.stem.split("-")[2]
    removed = []
    for old in sorted(target.parent.glob("driver-classes-*.jsa")):
        parts = old.stem.split("-")
        if old != target and (len(parts) == 3 or parts[2] == folder):
            old.unlink(missing_ok=True)
            removed.append(old)
    return removed


def use_options(settings: Settings) -> list[str]:
    """JVM options that map the archive, or none when it has not been recorded (or was deleted)."""
    path = archive_path(settings)
    return [f"-XX:SharedArchiveFile={path}", QUIET] if path.is_file() else []


def dump_options(target: Path) -> list[str]:
    """JVM options that write the classes the JVM loaded to `target` when it exits."""
    return [f"-XX:ArchiveClassesAtExit={target}", QUIET]


def candidate_path(target: Path) -> Path:
    """Where this process's JVM writes the archive before it is verified (named after this process)."""
    return target.with_name(f".{target.name}.{os.getpid()}.tmp")


def remove_stale_candidates(target: Path) -> list[Path]:
    """Delete unverified archives left by processes that are gone (a set-up killed while recording); returns them."""
    removed = []
    for stale in target.parent.glob(f".{target.name}.*.tmp"):
        pid = stale.name.rsplit(".", 2)[-2]
        if pid.isdigit() and not _alive(int(pid)):
            stale.unlink(missing_ok=True)
            removed.append(stale)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        pass
    return True


def promote(candidate: Path, target: Path, java_home: str, class_path: str) -> bool:
    """Map `candidate` in a fresh JVM with the class path it was made for, verifying every byte; rename it to
    `target` when that works, delete it otherwise (logging the JVM's reason). Returns whether `target` now holds it."""
    reason = refusal(candidate, java_home, class_path)
    if reason is not None:
        log.warning("class archive %s not used: %s", candidate.name, reason)
        candidate.unlink(missing_ok=True)
        return False
    os.replace(candidate, target)
    return True


def refusal(candidate: Path, java_home: str, class_path: str) -> str | None:
    """Why a JVM with this class path cannot map `candidate` (None when it maps and verifies)."""
    java = Path(java_home) / "bin" / "java"
    # A damaged archive crashes this JVM: no crash report or core file is left behind. A small heap: the check
    # must not fail for want of memory while pipelines run beside it (the default reserves a quarter of RAM).
    crash = ["-XX:ErrorFile=/dev/null", "-XX:-CreateCoredumpOnCrash", "-Xmx64m"]
    command = [str(java), "-Xshare:on", "-XX:+VerifySharedSpaces", f"-XX:SharedArchiveFile={candidate}", *crash]
    if not candidate.is_file():
        return "no archive was written"
    try:
        # Not quiet: on failure the JVM's CDS warnings name the cause (a class path entry, another JDK build).
        checked = subprocess.run([*command, "-cp", class_path, "-version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the check could not run ({exc})"
    if checked.returncode == 0:
        return None
    said = [line.strip() for line in (checked.stdout + checked.stderr).splitlines()]
    lines = [line for line in said if line and not line.startswith("#")]  # '#' lines: a crash report's banner
    return f"exit {checked.returncode}: " + (" | ".join(lines[-4:]) or "the JVM crashed mapping it (damaged)")
