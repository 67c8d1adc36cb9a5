"""Homes whose warehouse is a bucket on the S3 test server, and the server's own files behind its objects."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from urllib.parse import urlparse

from infra.s3_server import S3Server
from infra.settings import Settings
from infra.spark import get_spark

TEST_BUCKET = "lake"


def in_bucket(settings: Settings, server: S3Server) -> Settings:
    """`settings` with its warehouse in the test bucket, under a prefix of its own, and a catalog name of its own
    (a running session keeps each catalog name's first warehouse), registered on the process's session."""
    name = f"{settings.catalog_name}_s3"
    moved = replace(
        settings, catalog_name=name, warehouse_url=f"s3a://{TEST_BUCKET}/{name}", object_store=server.store()
    )
    get_spark(moved)
    return moved


def backing_file(uri: str, server: S3Server | None) -> Path:
    """The local file of a `file:` URI, or the file the test server keeps an `s3a://` object in (so a test can
    age it or plant an orphan beside it, as a crashed writer would)."""
    parsed = urlparse(uri)
    if parsed.scheme in ("s3a", "s3"):
        assert server is not None, f"{uri} is in a bucket but the test has no S3 server"
        return server.data_dir / "buckets" / parsed.netloc / parsed.path.lstrip("/")
    return Path(parsed.path)


def plant_file(path: Path, data: bytes, server: S3Server | None) -> None:
    """Write `data` at `path`: a local file, or the object the test server keeps at that backing path (written
    through the S3 API, as a writer would)."""
    if server is None:
        path.write_bytes(data)
        return
    with server.store().filesystem().open_output_stream(str(path.relative_to(server.data_dir / "buckets"))) as out:
        out.write(data)
