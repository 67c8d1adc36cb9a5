"""Jars by Maven coordinates into the jar cache: fetched once with the `mvn` on PATH (through the repositories it
is configured with), refused unless the file's SHA-256 is the pinned one, and from then on used offline."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from infra.errors import SetupError


@dataclass(frozen=True)
class MavenJar:
    """One jar pinned by Maven coordinates and the SHA-256 of its file; `marker` is a class it must contain."""

    group: str
    artifact: str
    version: str
    sha256: str
    marker: str

    @property
    def coordinates(self) -> str:
        """`group:artifact:version`, as Maven takes it."""
        return f"{self.group}:{self.artifact}:{self.version}"

    @property
    def file_name(self) -> str:
        """The jar's file name in the cache (Maven's own)."""
        return f"{self.artifact}-{self.version}.jar"


def verify(name: str, path: Path, marker: str) -> Path:
    if not path.is_file():
        raise SetupError(f"required jar {name} is missing: {path} (run 'make setup')")
    try:
        with zipfile.ZipFile(path) as zf:
            zf.getinfo(marker)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise SetupError(f"jar {name} at {path} is broken (no {marker}): delete it and run 'make setup'") from exc
    return path


def usable(name: str, target: Path, marker: str) -> bool:
    """Whether a jar fetched or built earlier is there and sound; a broken one is deleted so it is made again.

    A jar found sound is stamped with its size and modification time (`<jar>.verified`), so every later session
    start skips reading its index again: for the 280 MB AWS SDK bundle of Spark 3.5's
    hadoop-aws that read alone took 0.7 s.
    """
    if not target.is_file():
        return False
    stat = target.stat()
    stamp, seal = target.with_name(target.name + ".verified"), f"{stat.st_size}:{stat.st_mtime_ns}:{marker}"
    with contextlib.suppress(OSError):
        if stamp.read_text() == seal:
            return True
    try:
        verify(name, target, marker)
    except SetupError:
        target.unlink()
        return False
    with contextlib.suppress(OSError):  # a read-only cache: verified again next time
        stamp.write_text(seal)
    return True


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def maven_jar(jar: MavenJar, cache: Path) -> Path:
    """The cached file of `jar`, resolved with Maven and checked against its pinned SHA-256 the first time."""
    return fetch_jars([jar], cache)[0]


def _fetch_pom(jars: Sequence[MavenJar]) -> str:
    """A POM whose direct dependencies are `jars` and none of theirs, so that one Maven run copies them all: a
    Maven JVM per jar cost 2-4 s of CPU each on two cores, and parallel runs took as long."""
    nothing = "<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>"
    dependencies = "".join(
        f"<dependency><groupId>{j.group}</groupId><artifactId>{j.artifact}</artifactId><version>{j.version}</version>"
        f"{nothing}</dependency>"
        for j in jars
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>local.tributary</groupId><artifactId>jar-fetch</artifactId><version>0</version>"
        f"<packaging>pom</packaging><dependencies>{dependencies}</dependencies></project>"
    )


def fetch_jars(jars: Sequence[MavenJar], cache: Path) -> list[Path]:
    """`jars` in the cache: those missing (or broken) fetched in one Maven run, each refused unless its SHA-256 is
    the pinned one."""
    missing = [jar for jar in jars if not usable(jar.coordinates, cache / jar.file_name, jar.marker)]
    if missing:
        mvn = shutil.which("mvn")
        if mvn is None:
            raise SetupError(
                f"jar {missing[0].coordinates} is not in the jar cache {cache} and Maven is missing to fetch it: "
                "install it ('apt-get install maven') and run 'make setup'"
            )
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            pom, out = Path(tmp) / "pom.xml", Path(tmp) / "out"
            pom.write_text(_fetch_pom(missing))
            goal = ["dependency:copy-dependencies", "-DexcludeTransitive=true", f"-DoutputDirectory={out}"]
            proc = subprocess.run([mvn, "-B", "-q", "-f", str(pom), *goal], capture_output=True, text=True)
            errors = [line for line in (proc.stdout + proc.stderr).splitlines() if "ERROR" in line][:3]
            detail = " ".join(errors) or f"exit code {proc.returncode}"
            for jar in missing:
                _accept(jar, out / jar.file_name, cache / jar.file_name, detail)
    return [cache / jar.file_name for jar in jars]


def _accept(jar: MavenJar, staged: Path, target: Path, detail: str) -> None:
    """Move the file Maven fetched for `jar` into the cache if it is the pinned file."""
    if not staged.is_file():
        raise SetupError(
            f"Maven could not fetch {jar.coordinates}: {detail}; check that Maven reaches its repository (or a "
            "mirror in ~/.m2/settings.xml) and run 'make setup'"
        )
    actual = file_sha256(staged)
    if actual != jar.sha256:
        raise SetupError(
            f"jar {jar.coordinates} fetched by Maven has SHA-256 {actual}, not the pinned {jar.sha256}: "
            "refusing it (a changed or corrupted artifact); check the repository Maven uses"
        )
    verify(jar.coordinates, staged, jar.marker)
    staged.replace(target)
