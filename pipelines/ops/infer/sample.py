"""Which landed files and records `tributary infer` samples, chosen and read in Python, without Spark.

Landed files are the files directly under `<landing>/<dataset>/` whose names do not start with `.` or `_` (what
Tributary's reader reads; `.gz` files are decompressed). Up to `sample_files` of them are sampled, spread evenly
over the folder in name order (the first and the last file always included), and up to `sample_rows` records are
read from them, the budget shared evenly (a short file leaves its share to the files after it). Lines are split
as the reader splits them: on `\\n`, blank lines skipped, a byte-order mark and a trailing `\\r` removed.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from infra.errors import TributaryError
from infra.paths import COMPRESSED_SUFFIXES, misnamed_compression, open_landed
from pipelines.io.landing import landed_paths

FORMATS = ("json", "csv", "parquet")
DEFAULT_SAMPLE_FILES = 20
DEFAULT_SAMPLE_ROWS = 10_000
# Suffixes that name a format, and the compressions Spark (and `infra.paths.open_landed`) undo by suffix.
_FORMAT_SUFFIXES = {".json": "json", ".jsonl": "json", ".ndjson": "json", ".csv": "csv", ".parquet": "parquet"}
# Java's `\s` (the reader keeps lines matching `\S`): a line of these bytes only is blank.
_BLANK = b" \t\n\x0b\x0c\r"
_BOM = "\ufeff".encode()
_DATASET = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class InferError(TributaryError):
    """The landing folder cannot be sampled: missing, empty, mixed formats, or unreadable files."""


def dataset_folder(landing: Path, dataset: str) -> Path:
    """The landing folder of `dataset`, or `InferError` when the name is not a plain folder name."""
    if not _DATASET.fullmatch(dataset) or dataset in (".", ".."):
        raise InferError(
            f"dataset {dataset!r} is not a folder name under the landing root {landing}; "
            "give the name of the folder the files are landed in, e.g. events"
        )
    return landing / dataset


def landed_files(folder: Path) -> list[Path]:
    """The landed files of `folder` in name order, or `InferError` naming the folder when there are none."""
    if not folder.is_dir():
        raise InferError(
            f"landing folder {folder} does not exist; land the dataset's files there first "
            "(TRIBUTARY_LANDING sets the landing root) or check the dataset name"
        )
    files = landed_paths(folder)
    if not files:
        raise InferError(
            f"landing folder {folder} has no landed files (names starting with '.' or '_', or ending in "
            "'._COPYING_', are not landed yet); "
            "land at least one file there first"
        )
    return files


def format_of(path: Path) -> str | None:
    """The format a landed file's name announces (`.json`, `.jsonl`, `.csv`, `.parquet`, maybe `.gz`), or None."""
    suffixes = [s.lower() for s in path.suffixes]
    compressed = bool(suffixes) and suffixes[-1] in COMPRESSED_SUFFIXES
    if compressed:
        suffixes = suffixes[:-1]
    fmt = _FORMAT_SUFFIXES.get(suffixes[-1]) if suffixes else None
    if fmt == "parquet" and compressed:
        return None  # Parquet compresses inside the file; Spark cannot read a gzipped Parquet file
    return fmt


def resolve_format(folder: Path, files: list[Path], fmt: str | None) -> str:
    """`fmt` when given, else the one format the file names announce; `InferError` if mixed or unknown."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise InferError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
        return fmt
    found: dict[str, list[Path]] = {}
    for path in files:
        name = format_of(path)
        if name is None:
            raise InferError(
                f"cannot tell the format of landing file {path} from its name; name landed files *.json, *.csv "
                "or *.parquet (*.json.gz and *.csv.gz too), or pass --format json|csv|parquet"
            )
        found.setdefault(name, []).append(path)
    if len(found) > 1:
        kinds = ", ".join(f"{len(paths)} {name} (e.g. {paths[0].name})" for name, paths in sorted(found.items()))
        raise InferError(
            f"landing folder {folder} mixes formats: {kinds}; a dataset's files are all read in one format: "
            "move the odd files to their own dataset folder, or pass --format to read them all as one"
        )
    return next(iter(found))


def spread_sample(files: list[Path], count: int) -> list[Path]:
    """Up to `count` of `files`, spread evenly over them in order; the first and the last always included."""
    if len(files) <= count:
        return list(files)
    if count == 1:
        return [files[-1]]
    step = (len(files) - 1) / (count - 1)
    return [files[round(i * step)] for i in range(count)]


def choose_sample(folder: Path, fmt: str | None, sample_files: int) -> tuple[str, list[Path], list[Path]]:
    """(format, landed files, files to sample) of `folder`, checked without Spark.

    Raises `InferError` for a missing or empty folder, mixed or unknown formats (when `fmt` is None), and a
    sampled file holding gzip data under a name without `.gz` (Spark would read it as garbage text).
    """
    if sample_files < 1:
        raise InferError(f"the file sample must be positive, got {sample_files}")
    files = landed_files(folder)
    fmt = resolve_format(folder, files, fmt)
    chosen = spread_sample(files, sample_files)
    for path in chosen:
        compression = misnamed_compression(path)
        if compression:
            raise InferError(
                f"landing file {path} holds {compression} data but its name does not end in .gz; "
                f"rename it to {path.name}.gz"
            )
    return fmt, files, chosen


def even_share(left: int, files_left: int) -> int:
    """Records to take from the next file: an even share of what is left (a short file leaves its share on)."""
    return math.ceil(left / files_left)


def _read_error(path: Path, exc: Exception) -> InferError:
    return InferError(f"landing file {path} cannot be read ({type(exc).__name__}: {exc}); fix or remove it")


def landed_lines(path: Path, limit: int, header: bool = False) -> tuple[bytes | None, list[bytes]]:
    """Up to `limit` non-blank lines of a landed file, as the reader reads them; for CSV also the header line.

    Lines are split on `\\n` and lose a leading byte-order mark and a trailing `\\r`, as the reader's lines do.
    With `header`, the file's first line is its header (None when it is blank) and lines equal to it are skipped.
    """
    first: bytes | None = None
    lines: list[bytes] = []
    try:
        with open_landed(path) as fh:
            for number, raw in enumerate(fh):
                line = raw.rstrip(b"\n").removeprefix(_BOM)
                line = line[:-1] if line.endswith(b"\r") else line
                if header and number == 0:
                    first = line if line.strip(_BLANK) else None
                    continue
                if len(lines) >= limit:
                    break
                if line.strip(_BLANK) and (first is None or line != first):
                    lines.append(line)
    except (OSError, EOFError, ValueError) as exc:
        raise _read_error(path, exc) from None
    return first, lines
