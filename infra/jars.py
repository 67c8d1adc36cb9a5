"""Assembly of the jars Spark needs: the Iceberg runtime, a relocated Jackson, the SQL guard, the SQLite driver.

The Iceberg runtime jar shipped in `snowpark-connect-deps-iceberg` lacks the relocated Jackson classes it
links against, so the first DDL fails with NoClassDefFoundError. We build the missing piece once: the
Jackson jars that ship inside pyspark, merged and relocated into `org.apache.iceberg.shaded` with
Debian's jarjar. The SQL guard (`infra/jvm`: the read-only SQL policy, its Spark session extension and the
SQL server's shared-secret authenticator) is compiled once with the JDK's javac against pyspark's jars.
Both results are cached outside git (`TRIBUTARY_JAR_CACHE`).
"""

from __future__ import annotations

import glob
import hashlib
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from infra.errors import SetupError
from infra.settings import Settings

ICEBERG_VERSION = "1.10.2"
JACKSON_VERSION = "2.15.2"
JACKSON_ARTIFACTS = ("jackson-core", "jackson-databind", "jackson-annotations", "jackson-datatype-jsr310")
RELOCATION_RULE = "rule com.fasterxml.jackson.** org.apache.iceberg.shaded.com.fasterxml.jackson.@1\n"
JARJAR = Path("/usr/share/java/jarjar.jar")
SQLITE_JDBC = Path("/usr/share/java/sqlite-jdbc.jar")
POSTGRES_JDBC = Path("/usr/share/java/postgresql.jar")
DEBIAN_PACKAGES = "libjarjar-java libxerial-sqlite-jdbc-java libxerial-sqlite-jdbc-jni"
SQL_GUARD_SOURCES = Path(__file__).parent / "jvm"
SQL_GUARD_EXTENSION = "tributary.sql.ReadOnlyExtension"
SQL_GUARD_AUTHENTICATOR = "tributary.sql.SharedSecretAuthenticator"

# A class each jar must contain; a jar without it is reported as broken.
_MARKERS = {
    "iceberg-runtime": "org/apache/iceberg/spark/SparkCatalog.class",
    "iceberg-extensions": "org/apache/iceberg/spark/extensions/IcebergSparkSessionExtensions.class",
    "jackson-relocated": "org/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonFactoryBuilder.class",
    "sqlite-jdbc": "org/sqlite/JDBC.class",
    "sql-guard": "tributary/sql/ReadOnlyPolicy.class",
}


@dataclass(frozen=True)
class SparkJars:
    """Jar files for `spark.jars` and the native library folder for the SQLite driver."""

    jars: tuple[Path, ...]
    native_lib_dir: Path | None


def _iceberg_jar_dir() -> Path:
    try:
        import snowpark_connect_deps_iceberg as pkg
    except ImportError as exc:
        raise SetupError(
            "the Iceberg jars are missing: install the PyPI package snowpark-connect-deps-iceberg==1.0.3 "
            "(run 'make setup')"
        ) from exc
    return Path(pkg.__file__).parent / "jars"


def _pyspark_jar_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _verify(kind: str, path: Path) -> Path:
    if not path.is_file():
        raise SetupError(f"required jar {kind} is missing: {path} (run 'make setup')")
    try:
        with zipfile.ZipFile(path) as zf:
            zf.getinfo(_MARKERS[kind])
    except (zipfile.BadZipFile, KeyError) as exc:
        raise SetupError(
            f"jar {kind} at {path} is broken (no {_MARKERS[kind]}): delete it and run 'make setup'"
        ) from exc
    return path


def _usable(kind: str, target: Path) -> bool:
    """Whether a jar built earlier is there and sound; a broken one is deleted so it is built again."""
    if not target.is_file():
        return False
    try:
        _verify(kind, target)
    except SetupError:
        target.unlink()
        return False
    return True


def build_relocated_jackson(cache: Path) -> Path:
    """Build (once) the Jackson jar relocated into Iceberg's shaded package; return its path."""
    target = cache / f"iceberg-{ICEBERG_VERSION}-jackson-{JACKSON_VERSION}-relocated.jar"
    if _usable("jackson-relocated", target):
        return target
    if not JARJAR.is_file():
        raise SetupError(f"{JARJAR} is missing: install Debian's jarjar with 'apt-get install libjarjar-java'")
    sources = [_pyspark_jar_dir() / f"{name}-{JACKSON_VERSION}.jar" for name in JACKSON_ARTIFACTS]
    for src in sources:
        if not src.is_file():
            raise SetupError(f"Jackson jar {src} is missing from the pyspark install: reinstall pyspark 3.5.9")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        merged = Path(tmp) / "jackson-merged.jar"
        seen: set[str] = set()
        with zipfile.ZipFile(merged, "w", zipfile.ZIP_DEFLATED) as out:
            for src in sources:
                with zipfile.ZipFile(src) as zf:
                    for info in zf.infolist():
                        name = info.filename
                        # Signatures, manifests and the Java 9 module descriptor do not survive relocation.
                        if name.startswith("META-INF/") or name.endswith("module-info.class") or name in seen:
                            continue
                        seen.add(name)
                        out.writestr(info, zf.read(name))
        rules = Path(tmp) / "rules.txt"
        rules.write_text(RELOCATION_RULE)
        staged = Path(tmp) / target.name
        proc = subprocess.run(
            ["java", "-jar", str(JARJAR), "process", str(rules), str(merged), str(staged)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise SetupError(f"jarjar failed to relocate Jackson: {proc.stderr.strip() or proc.stdout.strip()}")
        _verify("jackson-relocated", staged)
        staged.replace(target)
    return target


def javac() -> Path:
    """The JDK 17 compiler beside the `java` on PATH (else the `javac` on PATH); SetupError if there is none."""
    java = shutil.which("java")
    candidates = [Path(java).resolve().parent / "javac"] if java else []
    on_path = shutil.which("javac")
    candidates += [Path(on_path)] if on_path else []
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise SetupError(
        "javac is missing: the SQL guard jar is compiled at set-up; install the JDK with "
        "'apt-get install openjdk-17-jdk-headless' (or run 'make setup')"
    )


def build_sql_guard(cache: Path) -> Path:
    """Compile (once per source version) the Java classes in `infra/jvm` into a jar; return its path."""
    sources = sorted(SQL_GUARD_SOURCES.rglob("*.java"))
    if not sources:
        raise SetupError(f"the SQL guard sources are missing from {SQL_GUARD_SOURCES}: restore infra/jvm")
    digest = hashlib.sha256()
    for src in sources:
        digest.update(src.relative_to(SQL_GUARD_SOURCES).as_posix().encode() + b"\0" + src.read_bytes())
    target = cache / f"tributary-sql-guard-{digest.hexdigest()[:16]}.jar"
    if _usable("sql-guard", target):
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        classes = Path(tmp) / "classes"
        options = ["--release", "17", "-nowarn", "-Xlint:none", "-encoding", "UTF-8", "-d", str(classes)]
        proc = subprocess.run(
            [str(javac()), *options, "-cp", str(_pyspark_jar_dir() / "*"), *map(str, sources)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            errors = [line for line in proc.stderr.splitlines() if "warning: [path]" not in line]
            raise SetupError("javac failed to compile the SQL guard:\n" + "\n".join(errors[-20:]))
        staged = Path(tmp) / target.name
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as out:
            out.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: tributary\n")
            for cls in sorted(classes.rglob("*.class")):
                out.write(cls, cls.relative_to(classes).as_posix())
        _verify("sql-guard", staged)
        staged.replace(target)
    return target


def _native_sqlite_dir() -> Path | None:
    hits = sorted(glob.glob("/usr/lib/*/jni/libsqlitejdbc.so"))
    return Path(hits[0]).parent if hits else None


def spark_jars(settings: Settings) -> SparkJars:
    """Return the verified jar set for `settings`, building the relocated Jackson jar if needed."""
    iceberg_dir = _iceberg_jar_dir()
    jars = [
        _verify("iceberg-runtime", iceberg_dir / f"iceberg-spark-runtime-3.5_2.12-{ICEBERG_VERSION}.jar"),
        _verify("iceberg-extensions", iceberg_dir / f"iceberg-spark-extensions-3.5_2.12-{ICEBERG_VERSION}.jar"),
        build_relocated_jackson(settings.jar_cache),
        build_sql_guard(settings.jar_cache),
    ]
    native = None
    if settings.uses_sqlite:
        if not SQLITE_JDBC.is_file():
            raise SetupError(
                f"SQLite JDBC driver {SQLITE_JDBC} is missing: "
                "'apt-get install libxerial-sqlite-jdbc-java libxerial-sqlite-jdbc-jni'"
            )
        jars.append(_verify("sqlite-jdbc", SQLITE_JDBC))
        native = _native_sqlite_dir()
        if native is None:
            raise SetupError("libsqlitejdbc.so is missing: 'apt-get install libxerial-sqlite-jdbc-jni'")
    elif settings.jdbc_catalog_uri.startswith("jdbc:postgresql:"):
        if not POSTGRES_JDBC.is_file():
            raise SetupError(
                f"PostgreSQL JDBC driver {POSTGRES_JDBC} is missing: 'apt-get install libpostgresql-jdbc-java'"
            )
        jars.append(POSTGRES_JDBC)
    return SparkJars(jars=tuple(jars), native_lib_dir=native)
