"""Which files of a landing folder are landed: exactly the files Spark's file source reads there.

Everything that counts landed files uses this one rule: the run (what it checks before and after its stream),
reconciliation (landed lines = bronze rows) and the landing sensor (what starts a run). If they disagreed, a file
could be read but never trigger a run, or be counted as landed but never read.

Spark lists the folder and skips the names Hadoop tools use for files that are hidden or still being written
(`HadoopFSUtils.shouldFilterOutPathName`): names starting with `.`, names starting with `_` (unless they hold a
`=`, as a partition folder does, or start with `_metadata` or `_common_metadata`) and names ending in
`._COPYING_` (`hadoop fs -put` in flight). Every other file is read, whatever its suffix and also when it is
empty. Producers therefore write under a hidden name and rename the file into place when it is complete.

Two kinds of entries are never landed files: a symbolic link (a run refuses a landing folder holding one,
`pipelines.io.sources.check_landing`, since following it would ingest whatever it points to) and a subfolder (not
read: landing is not recursive; each run names the subfolders it leaves, `unread_subfolders`).

A landed text file is split into lines as Spark's text reader splits it: at `\n`, `\r\n` and a lone `\r`
(`landed_lines`); every byte is in exactly one line.

Nothing here needs Spark: the landing sensor lists the folders with it every few seconds, without a JVM.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from infra.settings import Settings
    from pipelines.spec.sources import FileSource

# Parquet summary files: Spark reads them although their names start with `_`.
_READ_ALTHOUGH_UNDERSCORE = ("_common_metadata", "_metadata")
_IN_FLIGHT_SUFFIX = "._COPYING_"
_UTF8_BOM = "\ufeff".encode()


# Characters a Spark reader takes as a glob pattern in a path it is given.
_GLOB = re.compile(r"[\\*?\[\]{}]")


def read_as_pattern(path: Path) -> bool:
    """Whether Spark's readers would take `path`, given as a path to read, as a pattern (the file is then parsed
    line by line from the folder's stream instead)."""
    return _GLOB.search(str(path)) is not None


def landing_folder(settings: Settings, source: FileSource) -> Path:
    """The folder a file source reads."""
    return settings.landing / source.dataset


def is_landed_name(name: str) -> bool:
    """Whether Spark's file source reads a file of this name (see the module docstring)."""
    if name.startswith(_READ_ALTHOUGH_UNDERSCORE):
        return True
    hidden = name.startswith(".") or (name.startswith("_") and "=" not in name)
    return not hidden and not name.endswith(_IN_FLIGHT_SUFFIX)


def landed_paths(folder: Path) -> list[Path]:
    """The landed files directly in `folder`, in name order; none when the folder does not exist.

    A landed file is a regular file, not a link, with a landed name (`is_landed_name`).
    """
    if not folder.is_dir():
        return []
    with os.scandir(folder) as entries:
        # is_file is False for an entry removed since the listing.
        landed = sorted(
            (e.name, e.path) for e in entries if is_landed_name(e.name) and e.is_file(follow_symlinks=False)
        )
    return [Path(path) for _, path in landed]


def unread_subfolders(folder: Path) -> list[str]:
    """The names of the subfolders of `folder` that hold files (landing is not recursive: they are not read)."""
    if not folder.is_dir():
        return []
    with os.scandir(folder) as entries:
        subfolders = [e for e in entries if is_landed_name(e.name) and e.is_dir(follow_symlinks=False)]
    return sorted(e.name for e in subfolders if any(p.is_file() for p in Path(e.path).rglob("*")))


def _line_reads(fh: IO[bytes]) -> Iterator[list[bytes]]:
    """The lines of a landed text file with their line ends, split as Spark's text reader splits them (at `\n`,
    `\r\n` and a lone `\r`): one list per read of the file, every byte in exactly one line."""
    rest = b""
    while chunk := fh.read(1 << 20):
        parts = (rest + chunk).splitlines(keepends=True)  # bytes split at exactly \n, \r\n and \r
        # The last part may go on in the next read (a `\r` may be the first half of `\r\n`).
        rest = parts.pop() if parts and not parts[-1].endswith(b"\n") else b""
        yield parts
    if rest:
        yield [rest]


def landed_lines(fh: IO[bytes]) -> Iterator[bytes]:
    """The lines of a landed text file as Spark's text reader splits them: at `\n`, `\r\n` and a lone `\r`,
    without their line ends."""
    for parts in _line_reads(fh):
        for part in parts:
            yield part.rstrip(b"\r\n")


# The first bytes a blank line can start with: ASCII white space, a line end, or a byte-order mark's first byte.
_BLANK_START = frozenset(b" \t\n\r\x0b\x0c" + _UTF8_BOM[:1])


def count_records(fh: IO[bytes]) -> int:
    """The non-blank lines of a landed text file (`landed_lines` without the lines `is_blank` judges blank),
    counted per read at C speed: only a line starting with a byte a blank line can start with is looked at
    (`is_blank` of a line with its line end: `strip` removes line ends too)."""
    return sum(
        len(parts) - sum(1 for part in parts if part[0] in _BLANK_START and is_blank(part)) for parts in _line_reads(fh)
    )


def is_blank(line: bytes) -> bool:
    """Whether a landed line is blank (only white space after a byte-order mark), as the text parse judges it
    (`pipelines.io.landing_parse.clean_lines`): not a record."""
    return not line.removeprefix(_UTF8_BOM).strip()
