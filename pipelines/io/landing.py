"""Which files of a landing folder are landed: exactly the files Spark's file source reads there.

Everything that counts landed files uses this one rule: the run (what it checks before and after its stream),
reconciliation (landed lines = bronze rows) and the landing sensor (what starts a run). If they disagreed, a file
could be read but never trigger a run, or be counted as landed but never read.

Spark lists the folder and skips the names Hadoop tools use for files that are hidden or still being written
(`HadoopFSUtils.shouldFilterOutPathName`): names starting with `.`, names starting with `_` (unless they hold a
`=`, as a partition folder does, or start with `_metadata` or `_common_metadata`) and names ending in
`._COPYING_` (`hadoop fs -put` in flight). Every other file is read, whatever its suffix and also when it is
empty. Producers therefore write under a hidden name and rename the file into place when it is complete.

Nothing here needs Spark: the landing sensor lists the folders with it every few seconds, without a JVM.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infra.settings import Settings
    from pipelines.spec.tables import FileSource

# Parquet summary files: Spark reads them although their names start with `_`.
_READ_ALTHOUGH_UNDERSCORE = ("_common_metadata", "_metadata")
_IN_FLIGHT_SUFFIX = "._COPYING_"


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

    A landed file is a regular file (or a link to one) with a landed name (`is_landed_name`).
    """
    if not folder.is_dir():
        return []
    with os.scandir(folder) as entries:
        # DirEntry.is_file follows links and is False for an entry removed since the listing.
        landed = sorted((e.name, e.path) for e in entries if is_landed_name(e.name) and e.is_file())
    return [Path(path) for _, path in landed]
