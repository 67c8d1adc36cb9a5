"""`tributary infer`: sample the files landed for a dataset and write their schema as code to paste into a spec.

How the sample is taken. Landed files are the files directly under `<landing>/<dataset>/` whose names do not
start with `.` or `_` (what Tributary's reader reads; `.gz` files are decompressed). Up to `sample_files` of them
are sampled, spread evenly over the folder in name order (the first and the last file always included), and up to
`sample_rows` records are read from them in Python, the budget shared evenly (a short file leaves its share to the
files after it). Lines are split as the reader splits them: on `\\n`, blank lines skipped, a byte-order mark and a
trailing `\\r` removed. The sampled records are written to a scratch file and Spark infers the schema from it with
its own inference: this reads exactly the rows the sample names, where `samplingRatio` would still open every file.

Choices, so the printed schema reads the files as Tributary's reader (`pipelines.io.sources`) does:

- JSON: inference runs with `inferTimestamp=true`; the reader parses with the same default `timestampFormat`,
  so what is inferred as a timestamp parses as one. Integers are `LongType` (Spark's JSON inference never
  narrows to `IntegerType`; a spec may). Numbers with a fraction stay `DoubleType` (no `prefersDecimal`): it
  sizes each decimal to the sample, so a later, larger amount would not fit, and it fails outright on exponent
  notation such as `1.5e3`. Instead, a double column whose sampled values are all plain decimals with at most
  4 places gets a comment suggesting `DecimalType` if it is money. A top-level column whose values are all
  `yyyy-MM-dd` dates is `DateType` (Spark's JSON inference says `TimestampType`; its CSV inference `DateType`).
- JSON field order: first seen (the key order of the first sampled records that hold them, nested objects too),
  not Spark's alphabetical order. The reader matches JSON fields by name, so the order only shapes the table,
  and the producer's order is the one a data engineer recognises.
- CSV: the reader maps columns by each file's header (`header=true` semantics), so fields are printed in header
  order; when sampled files have different headers, every column appears once, in first-seen order, with a
  comment on columns some headers lack. Spark infers the types (`inferSchema=true`) from the sampled rows of
  every layout put under one combined header. CSV's inference gives `IntegerType` when every value fits.
- Parquet files carry their schema: the sampled files' footers are merged (`mergeSchema`); no rows are read.
- Records the reader could not parse (it keeps them in `_corrupt_record`) are counted over the sample by that
  very reader (`pipelines.io.sources.batch_read_files` on the sample files) and reported as a comment.
"""

from __future__ import annotations

import csv
import json
import math
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    CharType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    MapType,
    StructField,
    StructType,
    TimestampType,
    VarcharType,
    YearMonthIntervalType,
)

from infra.errors import TributaryError
from infra.paths import misnamed_compression, open_landed
from pipelines.spec.tables import FileSource

FORMATS = ("json", "csv", "parquet")
DEFAULT_SAMPLE_FILES = 20
DEFAULT_SAMPLE_ROWS = 10_000
CORRUPT_COLUMN = "_corrupt_record"
IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")
# Suffixes that name a format, and the compressions Spark (and `infra.paths.open_landed`) undo by suffix.
_FORMAT_SUFFIXES = {".json": "json", ".jsonl": "json", ".ndjson": "json", ".csv": "csv", ".parquet": "parquet"}
_COMPRESSED = (".gz", ".bz2")
# Java's `\s` (the reader keeps lines matching `\S`): a line of these bytes only is blank.
_BLANK = b" \t\n\x0b\x0c\r"
_BOM = "\ufeff".encode()
_DATASET = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_INTEGER = re.compile(r"^[+-]?\d+$")
_PLAIN_DECIMAL = re.compile(r"^[+-]?(\d+)\.(\d+)$")
_MONEY_MAX_SCALE = 4
_MAX_PRECISION = 38  # Spark's DecimalType limit


class InferError(TributaryError):
    """The landing folder cannot be sampled: missing, empty, mixed formats, or unreadable files."""


@dataclass
class InferredSchema:
    """What `infer_schema` found: the schema and how it was sampled."""

    dataset: str
    folder: Path
    format: str
    schema: StructType
    files_total: int
    files_sampled: tuple[Path, ...]
    # Non-blank lines (JSON) or data rows (CSV) sampled; 0 for Parquet, whose schema is in the footers.
    rows_sampled: int = 0
    # Sampled records Tributary's reader would keep in `_corrupt_record` only.
    corrupt_rows: int = 0
    # Per top-level field, a remark printed next to it (a type hint).
    notes: dict[str, str] = field(default_factory=dict)


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
    files = sorted(p for p in folder.iterdir() if not p.name.startswith((".", "_")) and p.is_file())
    if not files:
        raise InferError(
            f"landing folder {folder} has no landed files (names starting with '.' or '_' are not landed yet); "
            "land at least one file there first"
        )
    return files


def format_of(path: Path) -> str | None:
    """The format a landed file's name announces (`.json`, `.jsonl`, `.csv`, `.parquet`, maybe `.gz`), or None."""
    suffixes = [s.lower() for s in path.suffixes]
    compressed = bool(suffixes) and suffixes[-1] in _COMPRESSED
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


def infer_schema(
    spark: SparkSession,
    folder: Path,
    fmt: str | None = None,
    sample_files: int = DEFAULT_SAMPLE_FILES,
    sample_rows: int = DEFAULT_SAMPLE_ROWS,
    *,
    scratch: Path | None = None,
) -> InferredSchema:
    """Infer the schema of the files landed under `folder` from a sample, as Tributary's reader will read them.

    `fmt` None takes the format from the file names (one format, or `InferError`). At most `sample_files` files
    and `sample_rows` records are read (see the module doc). The sample is staged in a temporary folder under
    `scratch` (default: the system's temporary folder). Missing or empty folders, unreadable files and samples
    without a single valid record raise `InferError`.
    """
    if sample_rows < 1:
        raise InferError(f"the row sample must be positive, got {sample_rows}")
    fmt, files, chosen = choose_sample(folder, fmt, sample_files)
    result = InferredSchema(folder.name, folder, fmt, StructType([]), len(files), tuple(chosen))
    try:
        with tempfile.TemporaryDirectory(prefix="tributary-infer-", dir=scratch) as tmp:
            if fmt == "json":
                _infer_json(spark, chosen, sample_rows, Path(tmp) / "sample.json", result)
            elif fmt == "csv":
                _infer_csv(spark, chosen, sample_rows, Path(tmp), result)
            else:
                _infer_parquet(spark, chosen, result)
    except (PySparkException, Py4JError) as exc:
        raise InferError(f"Spark could not read the sampled {fmt} files of {folder}: {_spark_reason(exc)}") from None
    if not result.rows_sampled and fmt != "parquet":
        raise InferError(
            f"the sampled files of {folder} hold no records (empty or blank); land files with data, "
            "or raise --sample-files if most files are empty"
        )
    if not result.schema.fields:
        raise InferError(
            f"none of the {result.rows_sampled} sampled records of {folder} is valid {fmt.upper()}; "
            "check the files, or pass --format if they are not " + fmt
        )
    return result


def _spark_reason(exc: Exception) -> str:
    """The first line of what Spark reported, without its stack trace."""
    text = str(exc)
    if isinstance(exc, Py4JJavaError):
        text = exc.java_exception.toString()
    return " ".join(text.strip().splitlines()[0].split())[:300] if text.strip() else type(exc).__name__


def _share(left: int, files_left: int) -> int:
    """Records to take from the next file: an even share of what is left (a short file leaves its share on)."""
    return math.ceil(left / files_left)


def _read_error(path: Path, exc: Exception) -> InferError:
    return InferError(f"landing file {path} cannot be read ({type(exc).__name__}: {exc}); fix or remove it")


def _landed_lines(path: Path, limit: int, header: bool = False) -> tuple[bytes | None, list[bytes]]:
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


class _JsonNumber(str):
    """The text of a JSON number with a fraction or exponent, kept as written (for the decimal hint)."""


def _loads(line: bytes) -> Any:
    try:
        return json.loads(line.decode("utf-8"), parse_float=_JsonNumber)
    except (UnicodeDecodeError, ValueError):
        return None


def _record_order(value: Any, order: dict[str, Any]) -> None:
    """Add the object keys of `value` to `order` (key → nested order) in the order they are first seen."""
    if isinstance(value, dict):
        for key, item in value.items():
            _record_order(item, order.setdefault(key, {}))
    elif isinstance(value, list):
        for item in value:  # the elements of an array share one struct type
            _record_order(item, order)


def _reorder(dt: DataType, order: dict[str, Any]) -> DataType:
    """`dt` with struct fields in first-seen order (fields never seen keep Spark's order, at the end)."""
    if isinstance(dt, StructType):
        by_name = {f.name: f for f in dt.fields}
        names = [n for n in order if n in by_name] + [n for n in by_name if n not in order]
        return StructType(
            [
                StructField(
                    n, _reorder(by_name[n].dataType, order.get(n, {})), by_name[n].nullable, by_name[n].metadata
                )
                for n in names
            ]
        )
    if isinstance(dt, ArrayType):
        return ArrayType(_reorder(dt.elementType, order), dt.containsNull)
    return dt


def _infer_json(spark: SparkSession, files: list[Path], rows: int, sample: Path, result: InferredSchema) -> None:
    lines: list[bytes] = []
    for i, path in enumerate(files):
        if len(lines) >= rows:
            break
        lines.extend(_landed_lines(path, _share(rows - len(lines), len(files) - i))[1])
    sample.write_bytes(b"".join(line + b"\n" for line in lines))
    result.rows_sampled = len(lines)
    if not lines:
        return
    inferred = (
        spark.read.options(
            lineSep="\n",
            inferTimestamp="true",
            mode="PERMISSIVE",
            columnNameOfCorruptRecord=CORRUPT_COLUMN,
        )
        .json(str(sample))
        .schema
    )
    order: dict[str, Any] = {}
    values: dict[str, list[Any]] = {}
    for line in lines:
        record = _loads(line)
        _record_order(record, order)
        if isinstance(record, dict):
            for key, value in record.items():
                values.setdefault(key, []).append(value)
    schema = _reorder(StructType([f for f in inferred.fields if f.name != CORRUPT_COLUMN]), order)
    result.schema = StructType([_refine(f, values.get(f.name), result.notes) for f in schema.fields])
    result.corrupt_rows = _count_corrupt(spark, result, [sample])


def _csv_cells(line: bytes) -> list[str]:
    return next(csv.reader([line.decode("utf-8", errors="replace")], escapechar="\\"), [])


def _infer_csv(spark: SparkSession, files: list[Path], rows: int, scratch: Path, result: InferredSchema) -> None:
    """Infer CSV columns by header name: every header layout of the sample, columns in first-seen order."""
    layouts: dict[bytes, list[bytes]] = {}  # header line -> its sampled data lines
    seen_in: dict[str, int] = {}  # column (lower case) -> how many sampled files' headers name it
    files_with_header = 0
    for i, path in enumerate(files):
        if result.rows_sampled >= rows:
            break
        header, taken = _landed_lines(path, _share(rows - result.rows_sampled, len(files) - i), header=True)
        if header is None:
            continue  # an empty file, or one without a header line: nothing to infer from
        names = _header_names(header)
        twice = sorted({n for n in names if [m.lower() for m in names].count(n.lower()) > 1})
        if twice:
            raise InferError(
                f"landing file {path} names column(s) {', '.join(twice)} more than once in its header; "
                "give every column its own name"
            )
        files_with_header += 1
        for name in names:
            seen_in[name.lower()] = seen_in.get(name.lower(), 0) + 1
        layouts.setdefault(header, []).extend(taken)
        result.rows_sampled += len(taken)
    if not result.rows_sampled:
        return
    # Spark infers the types from one file holding every layout's rows under the union of the headers (cells of
    # rows whose cell count differs from their header's are left out: the reader keeps those rows as corrupt).
    columns: dict[str, str] = {}  # lower case -> the spelling first seen
    for header in layouts:
        for name in _header_names(header):
            columns.setdefault(name.lower(), name)
    position = {key: i for i, key in enumerate(columns)}
    values: list[list[str | None]] = [[] for _ in columns]
    union = scratch / "union.csv"
    with union.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, escapechar="\\", doublequote=False, lineterminator="\n")
        writer.writerow(columns.values())
        for header, lines in layouts.items():
            names = _header_names(header)
            for line in lines:
                cells = _csv_cells(line)
                if len(cells) != len(names):
                    continue
                row = [""] * len(columns)
                for name, cell in zip(names, cells, strict=True):
                    row[position[name.lower()]] = cell
                writer.writerow(row)
                for i, cell in enumerate(row):
                    values[i].append(cell if cell != "" else None)
    schema = spark.read.options(header="true", inferSchema="true", mode="PERMISSIVE").csv(str(union)).schema
    fields = []
    for i, (key, f) in enumerate(zip(columns, schema.fields, strict=True)):
        named = StructField(columns[key], f.dataType, f.nullable)
        fields.append(_refine(named, values[i], result.notes))
        if seen_in[key] < files_with_header:
            lacking = files_with_header - seen_in[key]
            note = f"not in every header: {lacking} of {files_with_header} sampled files lack it"
            result.notes[named.name] = "; ".join(filter(None, [result.notes.get(named.name), note]))
    result.schema = StructType(fields)
    # The reader counts the corrupt rows, each layout in a file of its own (it maps columns by each file's header).
    samples = []
    for k, (header, lines) in enumerate(layouts.items()):
        sample = scratch / f"layout-{k}.csv"
        sample.write_bytes(b"".join(line + b"\n" for line in [header, *lines]))
        samples.append(sample)
    result.corrupt_rows = _count_corrupt(spark, result, samples)


def _header_names(header: bytes) -> list[str]:
    """Column names of a header line, as the reader takes them (trimmed; an empty name is `_c<position>`)."""
    return [cell.strip() or f"_c{i}" for i, cell in enumerate(_csv_cells(header))]


def _infer_parquet(spark: SparkSession, files: list[Path], result: InferredSchema) -> None:
    result.schema = spark.read.option("mergeSchema", "true").parquet(*(str(p) for p in files)).schema


def _count_corrupt(spark: SparkSession, result: InferredSchema, samples: list[Path]) -> int:
    """Sampled records Tributary's reader keeps in `_corrupt_record`, counted by that reader on the sample files."""
    from pipelines.io.sources import batch_read_files  # the reader itself: its parse defines what is corrupt

    source = FileSource(result.dataset, result.format, result.schema)  # type: ignore[arg-type]
    df = batch_read_files(spark, source, [str(p) for p in samples])
    return df.filter(F.col(CORRUPT_COLUMN).isNotNull()).count()


def _refine(f: StructField, values: list[Any] | None, notes: dict[str, str]) -> StructField:
    """Apply the date rule and note the decimal hint and null-only columns for a top-level field."""
    present = [v for v in values or [] if v is not None]
    if values and not present:
        notes[f.name] = f"only nulls in the sample: {_type_code(f.dataType, set())} is a guess"
        return f
    if (
        isinstance(f.dataType, TimestampType)
        and present
        and all(isinstance(v, str) and _DATE.match(v) for v in present)
    ):
        return StructField(f.name, DateType(), f.nullable, f.metadata)
    if isinstance(f.dataType, DoubleType) and present:
        hint = _decimal_hint(present)
        if hint:
            notes[f.name] = hint
    return f


def _decimal_hint(values: list[Any]) -> str | None:
    """A `DecimalType` suggestion when every value is a plain decimal with at most 4 places (money-like)."""
    scale = digits = 0
    for value in values:
        if isinstance(value, bool):
            return None
        if isinstance(value, int) or (isinstance(value, str) and _INTEGER.match(value.strip())):
            digits = max(digits, len(str(value).strip().lstrip("+-").lstrip("0")) or 1)
            continue
        match = _PLAIN_DECIMAL.match(str(value).strip()) if isinstance(value, str) else None
        if match is None:
            return None
        digits = max(digits, len(match[1].lstrip("0")) or 1)
        scale = max(scale, len(match[2]))
    if not 1 <= scale <= _MONEY_MAX_SCALE or digits + scale > _MAX_PRECISION:
        return None
    precision = max(18, digits + scale)
    return f"exact decimals in the sample (at most {scale} places): DecimalType({precision}, {scale}) if money"


# ------------------------------------------------------------------------------------------------- code


def suggest_name(name: str) -> str:
    """A snake_case identifier (`^[a-z_][a-z0-9_]*$`) for a column name that is not one."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    snake = re.sub(r"[^0-9A-Za-z]+", "_", snake).strip("_").lower() or "column"
    return f"_{snake}" if snake[0].isdigit() else snake


def _nested_renames(dt: DataType, prefix: str) -> list[str]:
    if isinstance(dt, StructType):
        found = []
        for f in dt.fields:
            if not IDENTIFIER.match(f.name):
                found.append(f"{prefix}.{f.name} -> {suggest_name(f.name)}")
            found.extend(_nested_renames(f.dataType, f"{prefix}.{f.name}"))
        return found
    if isinstance(dt, ArrayType):
        return _nested_renames(dt.elementType, prefix)
    if isinstance(dt, MapType):
        return _nested_renames(dt.valueType, prefix)
    return []


def _type_code(dt: DataType, used: set[str]) -> str:
    """Python code that builds `dt`; the `pyspark.sql.types` names it needs are added to `used`."""
    name = type(dt).__name__
    used.add(name)
    if isinstance(dt, StructType):
        return f"StructType([{', '.join(_field_code(f, used) for f in dt.fields)}])"
    if isinstance(dt, ArrayType):
        return f"ArrayType({_type_code(dt.elementType, used)}{'' if dt.containsNull else ', False'})"
    if isinstance(dt, MapType):
        key, value = _type_code(dt.keyType, used), _type_code(dt.valueType, used)
        return f"MapType({key}, {value}{'' if dt.valueContainsNull else ', False'})"
    if isinstance(dt, DecimalType):
        return f"DecimalType({dt.precision}, {dt.scale})"
    if isinstance(dt, CharType | VarcharType):
        return f"{name}({dt.length})"
    if isinstance(dt, DayTimeIntervalType | YearMonthIntervalType):
        return f"{name}({dt.startField}, {dt.endField})"
    return f"{name}()"


def _field_code(f: StructField, used: set[str]) -> str:
    used.add("StructField")
    nullable = "" if f.nullable else ", False"
    return f"StructField({json.dumps(f.name)}, {_type_code(f.dataType, used)}{nullable})"


def schema_code(inferred: InferredSchema) -> str:
    """The inferred schema as Python code to paste into a spec, with remarks as comments.

    Column names that are not identifiers get a `# rename:` suggestion (rename them in the transform: the
    reader needs the names as landed); corrupt records in the sample are counted in a comment.
    """
    used: set[str] = {"StructType", "StructField"}
    lines = []
    for f in inferred.schema.fields:
        remarks = []
        if not IDENTIFIER.match(f.name):
            remarks.append(f"rename: {suggest_name(f.name)}")
        nested = _nested_renames(f.dataType, f.name)
        if nested:
            remarks.append(f"rename nested: {', '.join(nested)}")
        if f.name in inferred.notes:
            remarks.append(inferred.notes[f.name])
        comment = f"  # {'; '.join(remarks)}" if remarks else ""
        lines.append(f"    {_field_code(f, used)},{comment}")
    sampled = len(inferred.files_sampled)
    if inferred.format == "parquet":
        what = f"schema merged from the footers of {sampled} of {inferred.files_total} files"
    else:
        unit = "lines" if inferred.format == "json" else "rows"
        what = f"{inferred.rows_sampled} {unit} sampled from {sampled} of {inferred.files_total} files"
    head = [f"# tributary infer {inferred.dataset}: {what} in {inferred.folder} ({inferred.format})"]
    if inferred.corrupt_rows:
        if inferred.format == "json":
            bad = "lines were not valid JSON records"
        else:
            bad = "rows were not valid CSV for this schema"
        head.append(
            f"# {inferred.corrupt_rows} of {inferred.rows_sampled} sampled {bad}; "
            f"Tributary keeps such records in {CORRUPT_COLUMN}"
        )
    imports = f"from pyspark.sql.types import {', '.join(sorted(used))}"
    source = f"# FileSource({json.dumps(inferred.dataset)}, {json.dumps(inferred.format)}, SCHEMA)"
    return "\n".join([*head, imports, "", "SCHEMA = StructType([", *lines, "])", source])
