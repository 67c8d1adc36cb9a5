"""Local file names from the URIs Spark and Iceberg record, and how landed files are opened."""

from __future__ import annotations

import bz2
import gzip
import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO
from urllib.parse import unquote, urlparse

# Spark decompresses landed files by their suffix; Python must read them the same way to count their lines.
_OPENERS = {".gz": gzip.open, ".bz2": bz2.open}
COMPRESSED_SUFFIXES = tuple(_OPENERS)
GZIP_MAGIC = b"\x1f\x8b"


def local_path(uri: str) -> Path | None:
    """The local path of a `file:` URI or plain path; None for a remote URI (s3a://, hdfs://, ...)."""
    text = _local_text(uri)
    return Path(text) if text is not None else None


def _local_text(uri: str) -> str | None:
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return unquote(parsed.path)
    return None


def canonical(uri: str) -> str:
    """A file URI or path as one canonical string, so names recorded by Spark and listed by Python compare equal."""
    return canonical_all([uri])[0]


def canonical_all(uris: Iterable[str]) -> list[str]:
    """`canonical` of each URI, resolving each folder once: a landing folder can hold thousands of files, and
    resolving a path checks every folder on the way (only a file that is itself a link is resolved further)."""
    folders: dict[str, str] = {}
    out = []
    for uri in uris:
        path = _local_text(uri)
        if path is None:
            out.append(uri)
            continue
        folder, name = os.path.split(os.path.abspath(path))
        real = folders.get(folder)
        if real is None:
            real = folders[folder] = os.path.realpath(folder)
        joined = os.path.join(real, name)
        out.append(os.path.realpath(joined) if os.path.islink(joined) else joined)
    return out


def open_landed(path: Path) -> IO[bytes]:
    """Open a landed file for reading its bytes as Spark reads them (decompressed by suffix)."""
    return _OPENERS.get(path.suffix, open)(path, "rb")  # type: ignore[operator]


def misnamed_compression(path: Path) -> str | None:
    """'gzip' when a file holds gzip data but is not named `.gz` (Spark would read the compressed bytes as text)."""
    if path.suffix in _OPENERS:
        return None
    with open(path, "rb") as fh:
        return "gzip" if fh.read(2) == GZIP_MAGIC else None
