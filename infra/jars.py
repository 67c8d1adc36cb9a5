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
shared-secret authenticator, the catalog of Delta table folders, the one-pass shape test of landed JSON lines, and
the MERGE whose Iceberg commit carries properties) are compiled once with the JDK's javac against pyspark's,
delta-spark's and Iceberg's jars into one jar, cached likewise.
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
    "iceberg-spark-runtime-4.1_2.13",
    "1.12.0",  # 1.11 and later: the Iceberg stream implements availableNow; the runtime for Spark 4.1 and Scala 2.13
    "3123c3798af642dd537230923548e013ef41cc28b6626e5225808cf5670a0f82",
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
    "delta-spark_4.1_2.13",
    "4.4.0",  # the Delta line built for Spark 4.1 (4.4.1 is not served by Maven here)
    "75a9400986853c061f5109f012547de2545a5759e5e752e5ef633dabe16a4f10",
    "io/delta/sql/DeltaSparkSessionExtension.class",
)
DELTA_STORAGE = MavenJar(
    "io.delta",
    "delta-storage",
    "4.4.0",
    "c46735481fa8e326b0957be02b4420cbcab4b325bb08009b7f2045a95133f1cc",
    "io/delta/storage/LogStore.class",
)
# delta-spark's other dependencies (Scala 2.13, ANTLR, Parquet, Jackson) are the ones pyspark 4.1 ships; its Delta
# Kernel and Unity Catalog client dependencies serve catalog-managed tables, which Tributary does not create.
DELTA_JARS = (DELTA_SPARK, DELTA_STORAGE)
# Spark's Kafka connector and what it needs beyond pyspark's own jars (compression codecs, Scala's parallel
# collections and the rest come with pyspark). 4.1.1 is the newest 4.1 release of the connector and its token
# provider that Maven serves here; a Spark line keeps its connector binary-compatible across patches.
KAFKA_JARS = (
    MavenJar(
        "org.apache.spark",
        "spark-sql-kafka-0-10_2.13",
        "4.1.1",
        "9c1ce986f548e6b1dcb0e2dfe2f253a0bc58f2232a32a0c9c6c674dd25a8570c",
        "org/apache/spark/sql/kafka010/KafkaSourceProvider.class",
    ),
    MavenJar(
        "org.apache.spark",
        "spark-token-provider-kafka-0-10_2.13",
        "4.1.1",
        "e510adc37b03d01d0a190d0dab472b5538e05eaa77454f7e9477156d7a6820ae",
        "org/apache/spark/kafka010/KafkaConfigUpdater.class",
    ),
    MavenJar(
        "org.apache.kafka",
        "kafka-clients",
        "3.9.1",  # the client the connector is built with
        "7568b998572d256f0b7bc0afdc1b7a2588b8b08415c62ce314c864a6851ae9d9",
        "org/apache/kafka/clients/consumer/KafkaConsumer.class",
    ),
    MavenJar(
        "org.apache.commons",
        "commons-pool2",
        "2.12.1",
        "5273c8bc8c0dca2211175c0d27efbd7228efae99689aac001a8e1ef8e872e9ef",
        "org/apache/commons/pool2/impl/GenericKeyedObjectPool.class",
    ),
)
# The AWS SDK v2 modules hadoop-aws 3.4 uses, one jar each at the release hadoop-aws 3.4.2 is built against, instead
# of the SDK's 640 MB `bundle`; the libraries they share with Spark (Netty, Apache HttpClient, commons-codec,
# commons-logging, SLF4J) are pyspark's own.
_AWS_SDK = "2.29.52"
_AWS_MODULES = (  # (artifact, SHA-256); the checksum pins each file, so its manifest is the marker checked
    ("annotations", "8cd8bd8afd7eca5a367f69fd87427f6d9f3e7d359962122da24d71f1963f00cd"),
    ("apache-client", "c96494be30ecac6f0ab7a35fdd91a4c77ca8a5daf62f3d9d84644ef0f0524dc6"),
    ("arns", "f5a4d1d9b4e4fc63c9bda49bcf1c59d23fd876b276c6b43aaca12969337303a6"),
    ("auth", "4d8143b6198dc7a530c2ccdd813129c132b96736086c0d4fea85480b9bdbc5fe"),
    ("aws-core", "eb560c064fbaac7e2e7f4a77ac343d3083bea0d7f6e2c69ba022d3f3e859be90"),
    ("aws-query-protocol", "1b117672963ee5059c45f2aadb110f191b578d108d8f08d7c7a59e6c0b098a8e"),
    ("aws-xml-protocol", "daf87b429373ad586d165003b5b1d4fe498c6472eb65ec9a9e2aa7d56f3917dd"),
    ("checksums", "bca99ff25c9b917d6be03e5dce78ad5328e7dca485e96024fa8476e4192a800a"),
    ("checksums-spi", "21193b9b648843dcaff493f0dd80abab9ee6871b203b9218120554698d8f7b8a"),
    ("crt-core", "4e1f33de21b688695fec91b977ddfa99e9d376edcbad06a62b0c138c60b37de4"),
    ("endpoints-spi", "e54f246c668d70b55cffe0c8fad18d4465e74e22db75139918bd30610093d1e6"),
    ("http-auth", "d8aa3bd376aaec7196396e65fe8755f1fdd169e51357f8128ecdc7d23a687450"),
    ("http-auth-aws", "7ae124e81ac0c2860bb61fdde34a388dbe823fef8509dd46a6bec805ada90308"),
    ("http-auth-aws-eventstream", "565a4aacce955c5ffaed551f6faaaa958e9e92b2f8514c8482f664edb2bab576"),
    ("http-auth-spi", "7a2168c5a7baa856d7ae9f9c4f7522d2db9f1361108c38f5b6ece66f249e6a2d"),
    ("http-client-spi", "8ea61ce3b527779fbfe119e0775c4b7cfdf274a979b1e50596a634685a5b6542"),
    ("identity-spi", "85104635abf9e5c044aaf7f8951b63efc2ef82051b5ee303571ee2e1fd8b46d0"),
    ("json-utils", "2652cdb3668311bcff6e643c8612b9fea266423ae1ce33743c84dd7f77904311"),
    ("metrics-spi", "1db2e3da338148ee40a716e1733c9a5b99e9e6daa4db3aa8bd7e718adafa2510"),
    ("netty-nio-client", "07238668c9cf54531ee269fd6e2a1e2650fb75d6774d401f406c2a14f26af654"),
    ("profiles", "fef84619d101838ba45f48d0caddb09a85d9ed8bf869095bd7d2064796856cf7"),
    ("protocol-core", "7b32e41a3743b422d2edec1670f60b4c1e512fcd5ab7a53fef20742d6b9104d1"),
    ("regions", "5ee0e26277c679ffa70d83923b0d5f77a53066ecde8610f28be1856947d60eaf"),
    ("retries", "ca3752ba31399721980c6398992921ff5aa164e084b4c14484333df58c76a353"),
    ("retries-spi", "a4218ea742fc9e07a620629d7a258bfd92b8ea3ef75f1b99193d0898ca3efe99"),
    ("s3", "abaedea7e68063e9c4ab090f80d14b9884c57b50953bfe6e5acaa23025609efa"),
    ("s3-transfer-manager", "0c9e654637247187a7e2494eb7a8799477a772a7d554cd3ae787cd3e3bae3c55"),
    ("sdk-core", "ea8e9856569f85075a8a806d0481c4bd848c98b24fd6d706fc0b5883fc4604dc"),
    ("third-party-jackson-core", "eaece3eb60beb8ec09d8a4f48d5bff4110010b03cc23688bdcf2af2eb075cac6"),
    ("utils", "f150a38f2fec14ced2de6459bfe804f647c88baa573b218646ef89b436a29d42"),
)
# Hadoop's s3a file system for warehouses on object storage (infra/object_store.py): the release matching
# pyspark's Hadoop client (3.4.2), the AWS SDK modules it needs and its analytics input stream.
S3_JARS = (
    MavenJar(
        "org.apache.hadoop",
        "hadoop-aws",
        "3.4.2",
        "d2d24e6b715b5656b9d238bf13b6682a07e2004dd36aad74a73aeb854319f4d9",
        "org/apache/hadoop/fs/s3a/S3AFileSystem.class",
    ),
    MavenJar(
        "software.amazon.s3.analyticsaccelerator",
        "analyticsaccelerator-s3",
        "1.2.1",
        "11029552e37408e41e689b20150f4b372e0b4f232de321ccafd0fcf443cdfb5a",
        "software/amazon/s3/analyticsaccelerator/S3SeekableInputStream.class",
    ),
    *(MavenJar("software.amazon.awssdk", name, _AWS_SDK, sha, "META-INF/MANIFEST.MF") for name, sha in _AWS_MODULES),
    MavenJar(
        "software.amazon.eventstream",
        "eventstream",
        "1.0.1",
        "0c37d8e696117f02c302191b8110b0d0eb20fa412fce34c3a269ec73c16ce822",
        "software/amazon/eventstream/Utils.class",
    ),
    MavenJar(
        "org.reactivestreams",
        "reactive-streams",
        "1.0.4",
        "f75ca597789b3dac58f61857b9ac2e1034a68fa672db35055a8fb4509e325f28",
        "org/reactivestreams/Processor.class",
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
    import pyspark

    # Compiled against Scala, Spark, Delta and Iceberg classes: a jar built for another release of one of them fails
    # at run time (NoSuchMethodError in a Scala collection), so their releases are part of its name.
    digest = hashlib.sha256(f"{pyspark.__version__}\0{DELTA_SPARK.coordinates}\0{ICEBERG.coordinates}\0".encode())
    for src in sources:
        digest.update(src.relative_to(SQL_GUARD_SOURCES).as_posix().encode() + b"\0" + src.read_bytes())
    target = cache / f"tributary-sql-guard-{digest.hexdigest()[:16]}.jar"
    if usable("sql-guard", target, _SQL_GUARD_MARKER):
        return target
    cache.mkdir(parents=True, exist_ok=True)
    class_path = [str(_pyspark_jar_dir() / "*"), str(maven_jar(DELTA_SPARK, cache)), str(maven_jar(ICEBERG, cache))]
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
    # there it costs no start-up copy (a local executor copies each `spark.jars` file).
    # Executors elsewhere get it as `spark.jars` when the warehouse is in a bucket.
    s3 = tuple(maven_jar(jar, cache) for jar in S3_JARS)
    if settings.warehouse_url is not None and not settings.local_master:
        jars.extend(s3)
    return SparkJars(jars=tuple(jars), driver_class_path=s3)


def main(argv: list[str] | None = None) -> int:
    """`python -m infra.jars [--all]`: the jars the home's sessions use (with `--all` every pinned one) in the jar
    cache. It needs the standard library only, so the set-up fetches the jars while pip fills the venv."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    settings = Settings.from_env()
    try:
        fetch_jars(MAVEN_JARS if "--all" in args else session_maven_jars(settings), settings.jar_cache)
    except SetupError as exc:
        print(f"setup: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
