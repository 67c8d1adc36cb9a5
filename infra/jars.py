"""The jars Spark needs: Iceberg, Delta, Spark's Kafka connector and the JDBC drivers by Maven coordinates, and
Tributary's own classes.

`MAVEN_JARS` is the one place the JVM parts are pinned: coordinates, the SHA-256 of the file, and a class the jar
must hold. `tributary setup` (`make setup`: the jars this home's sessions use; `make setup-full`: all of them)
resolves the missing ones with one Maven run (`infra.maven`, through the repositories Maven is configured with:
Maven Central by default, or a mirror in `~/.m2/settings.xml`) into the jar cache (`TRIBUTARY_JAR_CACHE`),
refuses a file whose checksum differs, and from then on works offline. A session of a profile whose jars set-up
did not fetch (a PostgreSQL catalog) fetches them the same way when it starts. Every session passes the same
files as `spark.jars`, which on a cluster the driver serves to the executors.

Resolved once at set-up rather than with Spark's `spark.jars.packages`, which resolves (and needs the network) at
every session start. Iceberg's own runtime jar is complete; the runtime earlier taken from a PyPI package lacked
its relocated Jackson classes, which set-up rebuilt with Debian's jarjar: neither is needed any more. The SQLite
driver bundles its native library, so no system package or library path is needed either.

Tributary's own classes (`infra/jvm`: the read-only SQL policy, its Spark session extension, the SQL server's
shared-secret authenticator, the catalog of Delta table folders, and the one-pass shape test of landed JSON lines)
are compiled once with the JDK's javac against pyspark's and delta-spark's jars into one jar, cached likewise.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from infra.errors import SetupError
from infra.maven import MavenJar, fetch_jars, file_sha256, maven_jar, usable, verify

__all__ = ["MavenJar", "fetch_jars", "file_sha256", "maven_jar"]
from infra.settings import Settings

ICEBERG = MavenJar(
    "org.apache.iceberg",
    "iceberg-spark-runtime-3.5_2.12",
    "1.12.0",  # 1.11 and later: the Iceberg stream implements availableNow
    "8dd8c90e54ed1a20f2461309d047a255ee56382eb7c0a46162b27a4936fd86dc",
    "org/apache/iceberg/spark/extensions/IcebergSparkSessionExtensions.class",
)
SQLITE_JDBC = MavenJar(
    "org.xerial",
    "sqlite-jdbc",
    "3.51.1.0",
    "29eda0d1e5ab235b0f1baad05c531106c59c4a72c92a51a4b9c1a4e4c84abffe",
    "org/sqlite/JDBC.class",
)
POSTGRES_JDBC = MavenJar(
    "org.postgresql",
    "postgresql",
    "42.7.8",
    "2a32a9dcbc42d67a50ad3a0de5efd102c8d2be46720045f2cbd6689f160ab7c7",
    "org/postgresql/Driver.class",
)
DELTA_SPARK = MavenJar(
    "io.delta",
    "delta-spark_2.12",
    "3.3.2",  # the Delta line built for Spark 3.5
    "4e92085d5d794cf949c50bb665b91384857cad58680c2d0bfc9c7ad353e98e85",
    "io/delta/sql/DeltaSparkSessionExtension.class",
)
DELTA_STORAGE = MavenJar(
    "io.delta",
    "delta-storage",
    "3.3.2",
    "c096975a2ca97ccc9b4005aa5cce16c9ac3903139d340da6665b66ace67d7c36",
    "io/delta/storage/LogStore.class",
)
# delta-spark's other dependencies (Scala 2.12.18, ANTLR 4.9.3) are the ones pyspark 3.5 ships.
DELTA_JARS = (DELTA_SPARK, DELTA_STORAGE)
# Spark's Kafka connector and what it needs beyond pyspark's own jars (compression codecs and the rest come with
# pyspark). 3.5.7 is the newest 3.5 release Maven serves here; the 3.5 line keeps its connector binary-compatible.
KAFKA_JARS = (
    MavenJar(
        "org.apache.spark",
        "spark-sql-kafka-0-10_2.12",
        "3.5.7",
        "184f8bd4a3cd22299c49090d88b894f81fd7546b4ee64879519a0d76a685dbb8",
        "org/apache/spark/sql/kafka010/KafkaSourceProvider.class",
    ),
    MavenJar(
        "org.apache.spark",
        "spark-token-provider-kafka-0-10_2.12",
        "3.5.7",
        "9701914db5c6d09628b58d2d2c1ccd2c9ea28f32f83dd6cb21f98b8237531ff4",
        "org/apache/spark/kafka010/KafkaConfigUpdater.class",
    ),
    MavenJar(
        "org.apache.kafka",
        "kafka-clients",
        "3.4.1",  # the client the connector is built with
        "9d0a9058c8ede79db6e54ae378ed16fe8d1bead2894635a4aa6aa0b7981668c6",
        "org/apache/kafka/clients/consumer/KafkaConsumer.class",
    ),
    MavenJar(
        "org.apache.commons",
        "commons-pool2",
        "2.11.1",
        "ea0505ee7515e58b1ac0e686e4d1a5d9f7d808e251a61bc371aa0595b9963f83",
        "org/apache/commons/pool2/impl/GenericKeyedObjectPool.class",
    ),
)
# Hadoop's s3a file system for warehouses on object storage (infra/object_store.py): the release matching
# pyspark's Hadoop client (3.3.4), and the AWS SDK it was built against.
S3_JARS = (
    MavenJar(
        "org.apache.hadoop",
        "hadoop-aws",
        "3.3.4",
        "53f9ae03c681a30a50aa17524bd9790ab596b28481858e54efd989a826ed3a4a",
        "org/apache/hadoop/fs/s3a/S3AFileSystem.class",
    ),
    MavenJar(
        "com.amazonaws",
        "aws-java-sdk-bundle",
        "1.12.262",
        "873fe7cf495126619997bec21c44de5d992544aea7e632fdc77adb1a0915bae5",
        "com/amazonaws/services/s3/AmazonS3.class",
    ),
)
MAVEN_JARS = (ICEBERG, *DELTA_JARS, *KAFKA_JARS, *S3_JARS, SQLITE_JDBC, POSTGRES_JDBC)
ICEBERG_VERSION = ICEBERG.version

SQL_GUARD_SOURCES = Path(__file__).parent / "jvm"
SQL_GUARD_EXTENSION = "tributary.sql.ReadOnlyExtension"
SQL_GUARD_AUTHENTICATOR = "tributary.sql.SharedSecretAuthenticator"
DELTA_FOLDER_CATALOG = "tributary.sql.DeltaFolderCatalog"
JSON_LINE_SHAPE = "tributary.landing.JsonLineShape"
JSON_RESCUED = "tributary.landing.JsonRescued"
EXACT_DECIMAL = "tributary.landing.ExactDecimal"
CSV_DECIMAL = "tributary.landing.CsvDecimal"
CSV_RESCUED = "tributary.landing.CsvRescued"
LANDED_FILE_PATH = "tributary.landing.LandedFilePath"
BATCH_CONSTANT = "tributary.landing.BatchConstant"
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
ICEBERG_EXTENSION = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
_SQL_GUARD_MARKER = "tributary/sql/ReadOnlyPolicy.class"


@dataclass(frozen=True)
class SparkJars:
    """Jar files for `spark.jars`, and for the driver's own class path (`spark.driver.extraClassPath`)."""

    jars: tuple[Path, ...]
    driver_class_path: tuple[Path, ...] = ()


def _pyspark_jar_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def fetch_all(cache: Path) -> list[Path]:
    """Every pinned jar in the cache (`make setup-full`), so later sessions of any profile need no network."""
    return fetch_jars(MAVEN_JARS, cache)


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
    if usable("sql-guard", target, _SQL_GUARD_MARKER):
        return target
    cache.mkdir(parents=True, exist_ok=True)
    class_path = [str(_pyspark_jar_dir() / "*"), str(maven_jar(DELTA_SPARK, cache))]
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        classes = Path(tmp) / "classes"
        options = ["--release", "17", "-nowarn", "-Xlint:none", "-encoding", "UTF-8", "-d", str(classes)]
        proc = subprocess.run(
            [str(javac()), *options, "-cp", os.pathsep.join(class_path), *map(str, sources)],
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
        verify("sql-guard", staged, _SQL_GUARD_MARKER)
        staged.replace(target)
    return target


def session_maven_jars(settings: Settings) -> tuple[MavenJar, ...]:
    """The pinned jars a session of `settings` uses: Iceberg, Delta, Kafka, the catalog's JDBC driver and s3a."""
    drivers = (SQLITE_JDBC,) if settings.uses_sqlite else ()
    if not settings.uses_sqlite and settings.jdbc_catalog_uri.startswith("jdbc:postgresql:"):
        drivers = (POSTGRES_JDBC,)
    return (ICEBERG, *DELTA_JARS, *KAFKA_JARS, *drivers, *S3_JARS)


def spark_jars(settings: Settings) -> SparkJars:
    """The verified jar set for `settings`: Iceberg, Delta, Kafka, the catalog's JDBC driver and Tributary's classes."""
    cache = settings.jar_cache
    jars = [maven_jar(jar, cache) for jar in session_maven_jars(settings) if jar not in S3_JARS]
    jars.append(build_sql_guard(cache))
    # s3a is on the driver's class path in every session, so catalogs in buckets can be added to a running one;
    # there it costs no start-up copy (a local executor copies each `spark.jars` file, and the SDK is 280 MB).
    # Executors elsewhere get it as `spark.jars` when the warehouse is in a bucket.
    s3 = tuple(maven_jar(jar, cache) for jar in S3_JARS)
    if settings.warehouse_url is not None and not settings.local_master:
        jars.extend(s3)
    return SparkJars(jars=tuple(jars), driver_class_path=s3)
