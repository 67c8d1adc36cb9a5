"""An S3-compatible server on 127.0.0.1 for the tests and `make demo-s3`: S3Proxy over a local folder.

S3Proxy (Apache-2.0, `org.gaul:s3proxy` on Maven Central) speaks the S3 API, signatures included, and keeps each
bucket as a folder under `data_dir` (jclouds' `filesystem-nio2` provider, which keeps the empty folder markers
Hadoop's s3a relies on). It is a test server, not a production store: production points `TRIBUTARY_S3_ENDPOINT`
at MinIO, Ceph or AWS (docs/storage.md). `tributary setup` resolves it with Maven into the jar cache, its own jar
checked against a pinned SHA-256.
"""

from __future__ import annotations

import secrets
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from infra.errors import SetupError
from infra.jars import MavenJar, file_sha256
from infra.java import require_java
from infra.object_store import ObjectStore
from infra.ports import await_listening, free_port, stop_process

S3PROXY = MavenJar(
    "org.gaul",
    "s3proxy",
    "2.7.0",
    "4654e04025c462dbdb132bd311e088fbb043afa96b84980576c77eba4dd5f274",
    "org/gaul/s3proxy/Main.class",
)
_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>tributary</groupId><artifactId>s3proxy-class-path</artifactId><version>1</version>
<dependencies><dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{version}</version>
</dependency></dependencies></project>
"""
_LOGBACK = """<configuration><appender name="out" class="ch.qos.logback.core.ConsoleAppender"><encoder>
<pattern>%d %level %logger{20} - %msg%n</pattern></encoder></appender><root level="WARN"><appender-ref ref="out"/>
</root></configuration>
"""


def s3proxy_jars(cache: Path) -> Path:
    """The folder of S3Proxy's jars in the jar cache, resolved with Maven (and its dependencies) the first time."""
    folder = cache / f"s3proxy-{S3PROXY.version}"
    main = folder / S3PROXY.file_name
    if main.is_file() and file_sha256(main) == S3PROXY.sha256:
        return folder
    mvn = shutil.which("mvn")
    if mvn is None:
        raise SetupError("Maven is missing to fetch the S3 test server: install it ('apt-get install maven')")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        pom = Path(tmp) / "pom.xml"
        pom.write_text(_POM.format(group=S3PROXY.group, artifact=S3PROXY.artifact, version=S3PROXY.version))
        staged = Path(tmp) / "jars"
        proc = subprocess.run(
            [mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies", f"-DoutputDirectory={staged}"],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0 or not (staged / S3PROXY.file_name).is_file():
            detail = [line for line in (proc.stdout + proc.stderr).splitlines() if "ERROR" in line][:3]
            raise SetupError(
                f"Maven could not fetch {S3PROXY.coordinates}: {' '.join(detail) or f'exit code {proc.returncode}'}"
            )
        actual = file_sha256(staged / S3PROXY.file_name)
        if actual != S3PROXY.sha256:
            raise SetupError(f"{S3PROXY.coordinates} has SHA-256 {actual}, not the pinned {S3PROXY.sha256}: refused")
        shutil.rmtree(folder, ignore_errors=True)
        staged.replace(folder)
    return folder


@dataclass(frozen=True)
class S3Server:
    """A running S3 test server: its process, port, data folder and the credentials it accepts."""

    process: subprocess.Popen
    port: int
    data_dir: Path
    access_key: str
    secret_key: str = field(repr=False)

    @property
    def endpoint(self) -> str:
        """`http://127.0.0.1:<port>`."""
        return f"http://127.0.0.1:{self.port}"

    def store(self) -> ObjectStore:
        """The `ObjectStore` settings that reach this server."""
        return ObjectStore(self.endpoint, self.access_key, self.secret_key, path_style=True)

    def create_bucket(self, bucket: str) -> None:
        """Create `bucket` (nothing if it exists)."""
        self.store().filesystem(allow_bucket_creation=True).create_dir(bucket)

    def stop(self) -> None:
        """Stop the server and wait for it to exit."""
        stop_process(self.process, signal.SIGTERM)


def start_s3_server(data_dir: Path, cache: Path, port: int | None = None, timeout: float = 60.0) -> S3Server:
    """Start S3Proxy on 127.0.0.1 with its buckets under `data_dir/buckets`; wait until it accepts connections."""
    require_java()
    java = shutil.which("java")
    jars = s3proxy_jars(cache)
    port = port or free_port()
    buckets = data_dir / "buckets"
    buckets.mkdir(parents=True, exist_ok=True)
    access, secret = "tributary", secrets.token_hex(16)
    properties = data_dir / "s3proxy.properties"
    properties.write_text(
        "\n".join(
            [
                f"s3proxy.endpoint=http://127.0.0.1:{port}",
                "s3proxy.authorization=aws-v2-or-v4",
                f"s3proxy.identity={access}",
                f"s3proxy.credential={secret}",
                # Newer AWS SDKs (pyarrow's) send checksum headers S3Proxy 2.7 does not know.
                "s3proxy.ignore-unknown-headers=true",
                "jclouds.provider=filesystem-nio2",
                f"jclouds.filesystem.basedir={buckets}",
                f"jclouds.identity={access}",
                f"jclouds.credential={secret}",
                "",
            ]
        )
    )
    properties.chmod(0o600)
    logback = data_dir / "logback.xml"
    logback.write_text(_LOGBACK)
    log = (data_dir / "s3proxy.log").open("ab")
    command = [
        str(java or "java"),
        f"-Dlogback.configurationFile={logback}",
        "-cp",
        str(jars / "*"),
        "org.gaul.s3proxy.Main",
        "--properties",
        str(properties),
    ]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    await_listening(process, port, timeout, "S3 test server", log.name)
    return S3Server(process, port, data_dir, access, secret)
