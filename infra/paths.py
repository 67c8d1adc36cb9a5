"""Local file names from the URIs Spark and Iceberg record, and how landed files are opened."""

from __future__ import annotations

import bz2
import gzip
import os
from pathlib import Path
from typing import IO
from urllib.parse import unquote, urlparse

# Spark decompresses landed files by their suffix; Python must read them the same way to count their lines.
_OPENERS = {".gz": gzip.open, ".bz2": bz2.open}
COMPRESSED_SUFFIXES = tuple(_OPENERS)
GZIP_MAGIC = b"\x1f\x8b"


def local_path(uri: str) -> Path | None:
    """The local path of a `file:` URI or plain path; None for a remote URI (s3a://, hdfs://, ...)."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path))
    return None


def canonical(uri: str) -> str:
    """A file URI or path as one canonical string, so names recorded by Spark and listed by Python compare equal."""
    path = local_path(uri)
    return os.path.realpath(path) if path is not None else uri


def open_landed(path: Path) -> IO[bytes]:
    """Open a landed file for reading its bytes as Spark reads them (decompressed by suffix)."""
    return _OPENERS.get(path.suffix, open)(path, "rb")  # type: ignore[operator]


def misnamed_compression(path: Path) -> str | None:
    """'gzip' when a file holds gzip data but is not named `.gz` (Spark would read the compressed bytes as text)."""
    if path.suffix in _OPENERS:
        return None
    with open(path, "rb") as fh:
        return "gzip" if fh.read(2) == GZIP_MAGIC else None
