"""`tributary infer`'s output: the inferred schema as Python code to paste into a spec, remarks as comments."""

from __future__ import annotations

import json
import re

from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from infra.identifiers import is_column_name
from pipelines.io.landing_parse import CORRUPT_COLUMN
from pipelines.ops.infer.schema import InferredSchema
from pipelines.ops.infer.type_code import ddl_type, field_code


def suggest_name(name: str) -> str:
    """A snake_case identifier (`^[a-z_][a-z0-9_]*$`) for a column name that is not one."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    snake = re.sub(r"[^0-9A-Za-z]+", "_", snake).strip("_").lower() or "column"
    return f"_{snake}" if snake[0].isdigit() else snake


def _nested_renames(dt: DataType, prefix: str) -> list[str]:
    if isinstance(dt, StructType):
        found = []
        for f in dt.fields:
            if not is_column_name(f.name):
                found.append(f"{prefix}.{f.name} -> {suggest_name(f.name)}")
            found.extend(_nested_renames(f.dataType, f"{prefix}.{f.name}"))
        return found
    if isinstance(dt, ArrayType):
        return _nested_renames(dt.elementType, prefix)
    if isinstance(dt, MapType):
        return _nested_renames(dt.valueType, prefix)
    return []


def schema_code(inferred: InferredSchema) -> str:
    """The inferred schema as a dataset module to paste (its bronze table declared), with remarks as comments:
    `tb.schema("column type, ...")` text when it can express every column, else pyspark types.

    Column names that are not identifiers get a `# rename:` suggestion (rename them in the transform: the
    reader needs the names as landed); corrupt records in the sample are counted in a comment.
    """
    used: set[str] = {"StructType", "StructField"}
    # Written as `tb.schema` text, as the docs teach, when it can say every column (nullable, simple types, names
    # that are identifiers); else as pyspark types.
    ddl = [ddl_type(f.dataType) if f.nullable and is_column_name(f.name) else None for f in inferred.schema.fields]
    as_text = all(ddl)
    lines = []
    for i, f in enumerate(inferred.schema.fields):
        remarks = []
        if not is_column_name(f.name):
            remarks.append(f"rename: {suggest_name(f.name)}")
        nested = _nested_renames(f.dataType, f.name)
        if nested:
            remarks.append(f"rename nested: {', '.join(nested)}")
        if f.name in inferred.notes:
            remarks.append(inferred.notes[f.name])
        comment = f"  # {'; '.join(remarks)}" if remarks else ""
        if as_text:
            last = i == len(ddl) - 1
            lines.append(f"    {json.dumps(f'{f.name} {ddl[i]}' + ('' if last else ', '))}{comment}")
        else:
            lines.append(f"    {field_code(f, used)},{comment}")
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
    imports = ["import pipelines.authoring as tb"]
    if not as_text:
        imports.append(f"from pyspark.sql.types import {', '.join(sorted(used))}")
    table = f"bronze.{suggest_name(inferred.dataset)}"
    files = f"tb.files({json.dumps(inferred.dataset)}, {json.dumps(inferred.format)}, SCHEMA)"
    landing = f"tb.landing({json.dumps(table)}, {files})"
    opening, closing = ("SCHEMA = tb.schema(", ")") if as_text else ("SCHEMA = StructType([", "])")
    return "\n".join([*head, *imports, "", opening, *lines, closing, landing])
