"""How landed lines become typed rows: JSON and CSV parsed per line, by field name, nothing dropped.

Both formats are read as text, one row per non-blank line, so landed lines = rows per file and a line that
cannot be parsed is exactly one corrupt record (`_corrupt_record`, invalid UTF-8 replaced by U+FFFD so every
reader can decode it). A value is never stored under another column than the one its producer named:

- JSON fields are matched by name (case-sensitive, as Spark does).
- CSV columns are matched by the file's header, not by position: the driver reads each landed file's first
  line, and every distinct header becomes a layout parsed with its own column order. A header that lacks a
  declared column is a file problem (`CsvHeaders.problems`): the file is rejected whole
  (`pipelines.sources.file_health`).
- Every field the schema does not declare, and every value that failed type conversion (with its original
  text), goes to `_rescued_data`, a JSON object; the typed column is then NULL.
- A line that is not a JSON object, a CSV line whose cell count differs from its header's, and a record with a
  value that failed type conversion are corrupt: `_corrupt_record` holds the line as landed.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from infra.paths import open_landed
from pipelines.io.landing import landed_lines
from pipelines.io.landing_values import (
    NOT_ONE_OBJECT,
    UNDECLARED_KEY,
    exact_values,
    json_line_shape,
    json_rescued,
    lone_surrogate,
    wide,
    wide_type,
)
from pipelines.spec.sources import FileSource

CORRUPT_COLUMN = "_corrupt_record"
RESCUED_COLUMN = "_rescued_data"
# JSON is read strictly by default: Spark's parser accepts single-quoted names and strings, which are not JSON,
# so a line `{'id': 'x'}` would land as a valid record. Such a line is corrupt (kept whole in `_corrupt_record`)
# unless the source declares `options={"allowSingleQuotes": "true"}` (then read by the line parse).
STRICT_JSON = {"allowSingleQuotes": "false"}
REJECTED_COLUMN = "_file_rejected"
# The columns the platform adds to every landed row, after the declared fields (a bronze table declares them).
LANDED_LINEAGE = (
    StructField(CORRUPT_COLUMN, StringType()),
    StructField(RESCUED_COLUMN, StringType()),
    StructField(REJECTED_COLUMN, StringType()),  # why the row's file was rejected (pipelines.sources.file_health)
    StructField("_source_file", StringType()),
    StructField("_ingested_at", TimestampType()),
)
# The columns a Kafka message adds after those (`_source_file` holds `kafka://<topic>/<partition>/<offset>`);
# prefixed: `_partition` is a metadata column name Iceberg reserves.
KAFKA_LINEAGE = (
    StructField("_kafka_topic", StringType()),
    StructField("_kafka_partition", IntegerType()),
    StructField("_kafka_offset", LongType()),
    StructField("_kafka_timestamp", TimestampType()),
    StructField("_kafka_key", BinaryType()),
)
BOM = "\ufeff"
TEXT_MAP = MapType(StringType(), StringType())
# Options of Spark's CSV reader that mean nothing to a per-line parse (the header is handled here).
READER_ONLY_OPTIONS = {"header", "multiLine", "lineSep", "encoding", "enforceSchema", "inferSchema", "samplingRatio"}


@dataclass(frozen=True)
class CsvHeaders:
    """The headers of a set of landed CSV files: one layout (column names in file order) per distinct header."""

    layouts: tuple[tuple[str, ...], ...] = ()
    header_lines: tuple[str, ...] = ()
    by_file: dict[str, int] = field(default_factory=dict)  # file name -> layout index
    problems: dict[str, str] = field(default_factory=dict)  # file name -> why its header cannot be used


def file_name(file_path: Column) -> Column:
    """The file name of Spark's `_metadata.file_path` URI, decoded (Hadoop leaves '+' as is)."""
    return F.url_decode(F.replace(F.substring_index(file_path, "/", -1), F.lit("+"), F.lit("%2B")))


def read_csv_headers(source: FileSource, paths: Iterable[Path], known: CsvHeaders | None = None) -> CsvHeaders:
    """Read the header line of each landed CSV file (on the driver, first line only)."""
    layouts = list(known.layouts) if known else []
    lines = list(known.header_lines) if known else []
    by_file = dict(known.by_file) if known else {}
    problems = dict(known.problems) if known else {}
    declared = source.schema.names
    for path in paths:
        if path.name in by_file or path.name in problems:
            continue
        try:
            with open_landed(path) as fh:
                raw = next(landed_lines(fh), b"")
        except (OSError, EOFError) as exc:
            problems[path.name] = f"cannot read its header ({type(exc).__name__}: {exc})"
            continue
        try:
            line = raw.decode("utf-8").removeprefix(BOM)
        except UnicodeDecodeError:
            problems[path.name] = "its header line is not UTF-8"
            continue
        if not line.strip():
            continue  # an empty file: no rows, reported as empty by file health
        names = _header_names(line, source)
        problem = _header_problem(names, declared)
        if problem:
            problems[path.name] = problem
        if line not in lines:
            lines.append(line)
            layouts.append(names)
        by_file[path.name] = lines.index(line)
    return CsvHeaders(tuple(layouts), tuple(lines), by_file, problems)


def _header_names(line: str, source: FileSource) -> tuple[str, ...]:
    options = dict(source.options)
    row = next(csv.reader(io.StringIO(line), delimiter=options.get("sep", ","), quotechar=options.get("quote", '"')))
    declared = {n.lower(): n for n in source.schema.names}
    names = []
    for i, raw in enumerate(row):
        name = raw.strip()
        # A header matches a declared column regardless of case ("Event_ID" is event_id); an empty name (a
        # pandas index column) gets Spark's positional name.
        names.append(declared.get(name.lower(), name) if name else f"_c{i}")
    return tuple(names)


def _header_problem(names: tuple[str, ...], declared: list[str]) -> str | None:
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        return f"its header names column(s) {', '.join(duplicated)} more than once"
    missing = [n for n in declared if n not in names]
    if missing:
        return f"its header lacks column(s) {', '.join(missing)} (header: {', '.join(names)})"
    return None


def utf8_text(text: Column) -> Column:
    """`text` (a string column of landed bytes) with each invalid UTF-8 sequence replaced by U+FFFD: equal to
    `text` exactly when the bytes were UTF-8. (Spark 4's `decode` raises on invalid bytes instead of replacing.)"""
    return F.make_valid_utf8(text)


def clean_lines(df: DataFrame, *extra: Column, keep_blank: bool = False) -> DataFrame:
    """`_line` (valid UTF-8, without BOM or trailing CR), `_utf8` (whether the landed bytes were valid UTF-8),
    `_metadata` and `extra` of every non-blank line read as text (every record with `keep_blank`: a Kafka
    message is one record even when empty).

    Each step is its own projection so the decoded line is computed once per row; plain string tests, not a
    regular expression (a `\\r$` pattern is tried at every position of every line).
    """
    if not keep_blank:
        # Asked of the landed text (a test of the cleaned line would be pushed below the projections and decode
        # each line twice): a character other than white space, after the one leading BOM the cleaning removes.
        df = df.filter(F.col("value").rlike("^\\x{FEFF}?+\\s*+\\S"))
    decoded = df.select(utf8_text(F.col("value")).alias("_decoded"), "value", "_metadata")
    line = F.col("_decoded")
    no_bom = decoded.select(
        F.when(line.startswith(BOM), line.substr(F.lit(2), F.length(line))).otherwise(line).alias("_no_bom"),
        (line == F.col("value")).alias("_utf8"),
        "_metadata",
    )
    text = F.col("_no_bom")
    cleaned = F.when(text.endswith("\r"), text.substr(F.lit(1), F.length(text) - 1)).otherwise(text)
    return no_bom.select(cleaned.alias("_line"), "_utf8", "_metadata", *extra)


def parse_json_lines(df: DataFrame, source: FileSource, keep_blank: bool = False) -> DataFrame:
    """Typed rows, `_corrupt_record` and `_rescued_data` from JSON lines read as text (with `_metadata`).

    Every line is parsed typed (decimals at their widest scale, `exact_values`) and its shape judged in one pass
    (`json_line_shape`: exactly one JSON object, and whether it has an undeclared key); the text of every value is
    parsed only for the rare line that needs `_rescued_data`. A line that is not exactly one object, or that holds
    a lone UTF-16 surrogate escape (`lone_surrogate`), is corrupt: Spark's parser would drop the rest, or store `?`.
    """
    options = {**STRICT_JSON, **dict(source.options), "columnNameOfCorruptRecord": CORRUPT_COLUMN}
    names = source.schema.names
    parsed = clean_lines(df, keep_blank=keep_blank).select(
        F.from_json("_line", with_corrupt(wide(source.schema)), options).alias("_typed"),
        json_line_shape(F.col("_line"), names).alias("_shape"),
        "_utf8",
        "_line",
        "_metadata",
    )
    line = F.col("_line")
    # A line that is not one JSON object in UTF-8 text is corrupt whole: it has no typed values.
    ok = F.col("_utf8") & (F.col("_shape") != NOT_ONE_OBJECT) & ~lone_surrogate(line)
    values, inexact, exact_texts = exact_values(df.sparkSession, source.schema, lambda name: F.col(f"_typed.{name}"))
    # A JSON object whose typed parse is corrupt has a value that did not convert.
    failed = F.col(f"_typed.{CORRUPT_COLUMN}").isNotNull() | inexact
    has_unknown = F.col("_shape") == UNDECLARED_KEY
    rescued = json_rescued(line, names, values, exact_texts)
    # `ok` is computed once per line in its own projection: referenced by every column, and a condition's
    # right-hand side (short-circuited) escapes Spark's common subexpression elimination.
    judged = parsed.select("*", ok.alias("_ok"), failed.alias("_failed"))
    ok, failed = F.col("_ok"), F.col("_failed")
    return judged.select(
        *[F.when(ok, values[f.name]).alias(f.name) for f in source.schema.fields],
        F.when(~ok | failed, F.col("_line")).alias(CORRUPT_COLUMN),
        # Built only for the rare record that needs it.
        F.when(ok & (failed | has_unknown), rescued).alias(RESCUED_COLUMN),
        "_metadata",
    )


def parse_csv_lines(df: DataFrame, source: FileSource, headers: CsvHeaders, keep_blank: bool = False) -> DataFrame:
    """Typed rows by header name, `_corrupt_record` and `_rescued_data` from CSV lines read as text.

    A row of a file without a known layout (landed after its header was read) has `_layout` NULL; the batch
    writer refuses it (`pipelines.sources.file_health.check_layouts`). The header line of each file is dropped.
    """
    layout_of = (
        F.create_map(*[F.lit(x) for item in headers.by_file.items() for x in item])
        if headers.by_file
        else F.create_map().cast(MapType(StringType(), IntegerType()))
    )
    lines = clean_lines(df, layout_of[file_name(F.col("_metadata.file_path"))].alias("_layout"), keep_blank=keep_blank)
    header = _case(F.col("_layout"), [F.lit(h) for h in headers.header_lines], F.lit(None).cast("string"))
    lines = lines.filter(header.isNull() | (F.col("_line") != header))
    options = {k: v for k, v in source.options if k not in READER_ONLY_OPTIONS}
    options["columnNameOfCorruptRecord"] = CORRUPT_COLUMN
    declared = {f.name: wide_type(f) for f in source.schema.fields}
    layout, line = F.col("_layout"), F.col("_line")
    # Each line is parsed once, typed, by its own layout: `_typed<i>` is NULL for the other layouts' lines. A parse
    # kept out of conditional branches and in its own projection is computed once per row (Spark eliminates common
    # subexpressions only where they always run, and prunes a parse read field by field into one parse per field).
    typed = [F.col(f"_typed{i}") for i in range(len(headers.layouts))]
    parsed = lines.select(
        "*",
        *[
            F.from_csv(F.when(layout == i, line), csv_ddl(names, declared, typed=True), options).alias(f"_typed{i}")
            for i, names in enumerate(headers.layouts)
        ],
    )
    values: dict[str, list[Column]] = {name: [] for name in declared}
    failed: list[Column] = []
    rescued: list[Column] = []
    texts_needed: list[Column] = []
    for i, names in enumerate(headers.layouts):
        # Typed: corrupt when a cell does not convert or the cell count is wrong.
        present = StructType([f for f in source.schema.fields if f.name in names])
        exact, inexact, _ = exact_values(df.sparkSession, present, lambda name, i=i: typed[i][name])
        for f in source.schema.fields:
            values[f.name].append(exact.get(f.name, F.lit(None).cast(f.dataType)))
        failed.append(typed[i][CORRUPT_COLUMN].isNotNull() | inexact)
        extra = [n for n in names if n not in declared]
        # The text parse, only for a line that needs `_rescued_data`: undeclared columns, or a value that failed.
        texts_needed.append(
            F.when(
                layout == i if extra else failed[i], F.from_csv(line, csv_ddl(names, declared, typed=False), options)
            )
        )
        raw = F.col(f"_text{i}")
        texts = {n: raw[n] for n in names if n in declared}
        unknown = F.create_map(*[x for n in extra for x in (F.lit(n), raw[n])]) if extra else None
        rescued.append(F.when(raw.isNotNull(), rescued_json(present, exact, texts, unknown)))
    with_texts = parsed.select("*", *[text.alias(f"_text{i}") for i, text in enumerate(texts_needed)])
    corrupt = [F.when(fail, line) for fail in failed]
    return with_texts.select(
        *[_case(layout, values[f.name], F.lit(None).cast(f.dataType)).alias(f.name) for f in source.schema.fields],
        F.when(~F.col("_utf8"), line)
        .otherwise(_case(layout, corrupt, F.lit(None).cast("string")))
        .alias(CORRUPT_COLUMN),
        F.when(F.col("_utf8"), _case(layout, rescued, F.lit(None).cast("string"))).alias(RESCUED_COLUMN),
        "_layout",
        "_metadata",
    )


def with_corrupt(schema: StructType) -> StructType:
    """`schema` plus the `_corrupt_record` string column that Spark's parsers fill for a malformed record."""
    return StructType([*schema.fields, StructField(CORRUPT_COLUMN, StringType())])


def csv_ddl(names: tuple[str, ...], declared: dict, typed: bool) -> str:
    columns = [f"`{n}` {declared[n].simpleString() if typed and n in declared else 'string'}" for n in names]
    return ", ".join([*columns, f"`{CORRUPT_COLUMN}` string"])


def _case(key: Column, options: list[Column], default: Column) -> Column:
    """`CASE key WHEN 0 THEN options[0] WHEN 1 ... ELSE default END`."""
    if not options:
        return default
    out = F.when(key == 0, options[0])
    for i, option in enumerate(options[1:], start=1):
        out = out.when(key == i, option)
    return out.otherwise(default)


def rescued_json(
    schema: StructType, values: dict[str, Column], texts: dict[str, Column], unknown: Column | None
) -> Column:
    """`_rescued_data` of one parsed record: a JSON object of the fields the schema does not declare (`unknown`)
    and of the declared fields whose text did not convert exactly (their `values` NULL), with their original text
    (NULL when empty)."""
    checked = [f.name for f in schema.fields if f.name in texts]
    entries = [x for name in checked for x in (F.lit(name), F.when(values[name].isNull(), texts[name]))]
    parts = [F.map_filter(F.create_map(*entries), lambda _, v: v.isNotNull())] if entries else []
    if unknown is not None:
        parts.append(unknown)
    if not parts:
        return F.lit(None).cast("string")
    merged = parts[0] if len(parts) == 1 else F.map_concat(*parts)
    return F.when(F.size(merged) > 0, F.to_json(merged))


def unknown_fields(schema: StructType) -> Column:
    """The names in `_rescued_data` that the schema does not declare (an empty array when none)."""
    keys = F.map_keys(F.from_json(F.col(RESCUED_COLUMN), TEXT_MAP))
    return F.coalesce(F.filter(keys, lambda k: ~k.isin(*schema.names)), F.array().cast("array<string>"))


def rescued_value(name: str) -> Column:
    """The text of field `name` in `_rescued_data` (NULL when absent)."""
    return F.from_json(F.col(RESCUED_COLUMN), TEXT_MAP)[name]


def without_rescued(names: list[str]) -> Column:
    """`_rescued_data` with the fields `names` taken out (NULL when nothing is left)."""
    rest = F.map_filter(F.from_json(F.col(RESCUED_COLUMN), TEXT_MAP), lambda k, _: ~k.isin(*names))
    return F.when(F.size(rest) > 0, F.to_json(rest))


def read_schema(source: FileSource) -> StructType:
    """The columns a parsed landed file has: the declared fields, the corrupt record and the rescued data."""
    return StructType(
        [*source.schema.fields, StructField(CORRUPT_COLUMN, StringType()), StructField(RESCUED_COLUMN, StringType())]
    )
