"""`tributary infer`'s Spark step: the schema of the sampled records, by Spark's own inference.

The sampled records (`pipelines.ops.infer.sample`) are written to a scratch file and Spark infers the schema from
it: this reads exactly the rows the sample names, where `samplingRatio` would still open every file.

Choices, so the printed schema reads the files as Tributary's reader (`pipelines.io.sources`) does:

- JSON: inference runs with `inferTimestamp=true`; the reader parses with the same default `timestampFormat`,
  so what is inferred as a timestamp parses as one. Integers are `LongType` (Spark's JSON inference never
  narrows to `IntegerType`; a spec may). Spark's `prefersDecimal` is not used: it sizes each decimal to the
  sample, so a later, larger amount would not fit, and it fails outright on exponent notation such as `1.5e3`.
  Instead, a column Spark infers as `DoubleType` whose sampled values are all plain decimals with at most 4
  places is an exact `DecimalType` of at least 18 digits (amounts are not rounded), with a comment naming
  `double` as the alternative; other numbers with a fraction stay `DoubleType`. The same holds for CSV. A
  top-level column whose values are all `yyyy-MM-dd` dates is `DateType` (Spark's JSON inference says
  `TimestampType`; its CSV inference `DateType`).
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
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from pipelines.io.landing_parse import CORRUPT_COLUMN
from pipelines.ops.infer.sample import (
    DEFAULT_SAMPLE_FILES,
    DEFAULT_SAMPLE_ROWS,
    InferError,
    choose_sample,
    even_share,
    landed_lines,
)
from pipelines.ops.infer.values import csv_cells, header_names, parse_json_line, record_order, refine_field, reorder
from pipelines.spec.sources import FileSource


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
    and `sample_rows` records are read (see `pipelines.ops.infer.sample`). The sample is staged in a temporary
    folder under `scratch` (default: the system's temporary folder). Missing or empty folders, unreadable files
    and samples without a single valid record raise `InferError`.
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


def _infer_json(spark: SparkSession, files: list[Path], rows: int, sample: Path, result: InferredSchema) -> None:
    lines: list[bytes] = []
    for i, path in enumerate(files):
        if len(lines) >= rows:
            break
        lines.extend(landed_lines(path, even_share(rows - len(lines), len(files) - i))[1])
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
        record = parse_json_line(line)
        record_order(record, order)
        if isinstance(record, dict):
            for key, value in record.items():
                values.setdefault(key, []).append(value)
    schema = reorder(StructType([f for f in inferred.fields if f.name != CORRUPT_COLUMN]), order)
    result.schema = StructType([refine_field(f, values.get(f.name), result.notes) for f in schema.fields])
    result.corrupt_rows = _count_corrupt(spark, result, [sample])


def _infer_csv(spark: SparkSession, files: list[Path], rows: int, scratch: Path, result: InferredSchema) -> None:
    """Infer CSV columns by header name: every header layout of the sample, columns in first-seen order."""
    layouts: dict[bytes, list[bytes]] = {}  # header line -> its sampled data lines
    seen_in: dict[str, int] = {}  # column (lower case) -> how many sampled files' headers name it
    files_with_header = 0
    for i, path in enumerate(files):
        if result.rows_sampled >= rows:
            break
        header, taken = landed_lines(path, even_share(rows - result.rows_sampled, len(files) - i), header=True)
        if header is None:
            continue  # an empty file, or one without a header line: nothing to infer from
        names = header_names(header)
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
        for name in header_names(header):
            columns.setdefault(name.lower(), name)
    position = {key: i for i, key in enumerate(columns)}
    values: list[list[str | None]] = [[] for _ in columns]
    union = scratch / "union.csv"
    with union.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, escapechar="\\", doublequote=False, lineterminator="\n")
        writer.writerow(columns.values())
        for header, lines in layouts.items():
            names = header_names(header)
            for line in lines:
                cells = csv_cells(line)
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
        fields.append(refine_field(named, values[i], result.notes))
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


def _infer_parquet(spark: SparkSession, files: list[Path], result: InferredSchema) -> None:
    result.schema = spark.read.option("mergeSchema", "true").parquet(*(str(p) for p in files)).schema


def _count_corrupt(spark: SparkSession, result: InferredSchema, samples: list[Path]) -> int:
    """Sampled records Tributary's reader keeps in `_corrupt_record`, counted by that reader on the sample files."""
    from pipelines.io.sources import batch_read_files  # the reader itself: its parse defines what is corrupt

    source = FileSource(result.dataset, result.format, result.schema)  # type: ignore[arg-type]
    df = batch_read_files(spark, source, [str(p) for p in samples])
    return df.filter(F.col(CORRUPT_COLUMN).isNotNull()).count()
