"""Archiving of ingested landing files (`FileSource(archive=True)`): the landing folder holds only what is new.

Spark's file source lists the whole landing folder on every run, and the run checks every file it lists, so
a folder that keeps every file ever landed makes each run slower. With `archive=True`, after a run the files
of committed batches move from `<landing>/<folder>/` to `<home>/archive/<folder>/` (same name, same file
system, one atomic rename each). A file is moved only once the batch that read it is committed to its tables,
so a crash at any point leaves every file either still landed (read again only if its batch was never
committed) or archived (never listed again); none is lost or read twice.

Spark's own `cleanSource=archive` was not used: it moves files in a background thread on a best-effort basis
(a stopped query may leave them), into a path that repeats the whole source path, and the reconciliation of
landed lines needs to find every file it ever read.

Everything that must see every file ever received (the reconciliation of landed lines, a reprocess that
re-reads files, a full refresh that rebuilds bronze) finds archived files here, under the landing path they
were read from (`_source_file` keeps that path).
"""

from __future__ import annotations

import errno
import filecmp
import os
import shutil
from pathlib import Path

from infra.paths import canonical
from infra.settings import Settings
from pipelines.io.file_source_log import committed_files
from pipelines.io.landing import landed_paths, landing_folder
from pipelines.io.sources import landed_files
from pipelines.spec.sources import FileSource


def archive_folder(settings: Settings, source: FileSource) -> Path:
    """Where the ingested files of a source with `archive=True` are kept."""
    return settings.home / "archive" / source.dataset


def archived_files(settings: Settings, source: FileSource) -> dict[str, Path]:
    """Archived files by the canonical landing path they were read from."""
    landing = landing_folder(settings, source)
    return {canonical(str(landing / p.name)): p for p in landed_paths(archive_folder(settings, source))}


def received_files(settings: Settings, source: FileSource) -> dict[str, Path]:
    """Every file the source ever received, landed or archived, by the canonical landing path it is read from."""
    return {**landed_files(settings, source), **archived_files(settings, source)}


def archived_path(settings: Settings, source: FileSource, landed: Path) -> Path | None:
    """The archived copy of the landed file `landed`, if it was archived."""
    path = archive_folder(settings, source) / landed.name
    return path if path.is_file() else None


def archive_committed(settings: Settings, source: FileSource, checkpoint: Path, landed: dict[str, Path]) -> int:
    """Move the landed files (`landed`, by canonical path) read in committed batches to the archive folder.

    Returns the number of files moved. A file landed again under an archived name with the same bytes is
    removed (it was read once already); with other bytes it is left in place for the run's landing checks to
    refuse by name.
    """
    done = committed_files(checkpoint)
    target = archive_folder(settings, source)
    moved = 0
    for name, path in landed.items():
        if name not in done or not path.is_file():
            continue
        target.mkdir(parents=True, exist_ok=True)
        destination = target / path.name
        if destination.exists():
            if filecmp.cmp(path, destination, shallow=False):
                path.unlink()
            continue
        _move(path, destination)
        moved += 1
    return moved


def _move(path: Path, destination: Path) -> None:
    """Rename `path` to `destination`; across file systems, copy under a hidden name, rename, then delete."""
    try:
        os.replace(path, destination)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        partial = destination.with_name(f".{destination.name}.partial")
        shutil.copy2(path, partial)
        os.replace(partial, destination)
        path.unlink()


def restore_archived(settings: Settings, source: FileSource) -> int:
    """Move every archived file back into the landing folder (a full refresh reads them all again)."""
    folder = landing_folder(settings, source)
    restored = 0
    for path in archived_files(settings, source).values():
        if not (folder / path.name).exists():
            folder.mkdir(parents=True, exist_ok=True)
            _move(path, folder / path.name)
            restored += 1
    return restored
