"""The decorators that declare tables: `@bronze`, `@silver`, `@gold` on a function, `landing(...)` without one,
and the row expectations `@expect`, `@expect_or_quarantine`, `@expect_or_fail`.

The function *is* the table: its name is the table's name in the decorator's layer, its parameters name the
tables it reads (`silver_events` reads `silver.events`; a parameter defaulting to `static` is a reference
table read whole), and it returns a DataFrame whose schema becomes the table's.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

from pyspark.sql.types import StringType, StructField, StructType

from infra.settings import TABLE_FORMATS
from pipelines.authoring.declarations import (
    FLOWS,
    Declaration,
    DeclarationError,
    FlowDeclaration,
    Param,
    caller_module,
    place,
    record,
    table_of_param,
)
from pipelines.authoring.kinds import Kind, append
from pipelines.spec.rules import Action, Rule
from pipelines.spec.sources import FileSource, KafkaSource, SchemaEvolution, Source, Watermark
from pipelines.spec.tables import Layer, MaintenancePolicy

_RULES = "__tributary_rules__"
_DECLARED = "__tributary_table__"


class _Static:
    """The default value that marks a parameter as a reference table, read whole when the run starts."""

    def __repr__(self) -> str:
        return "static"


static: Any = _Static()


def files(
    folder: str,
    format: Literal["json", "csv", "parquet"],
    schema: StructType,
    *,
    options: dict[str, str] | None = None,
    schema_evolution: SchemaEvolution = "rescue",
    reject_file_ratio: float = 0.5,
    max_files_per_trigger: int | None = None,
    archive: bool = False,
) -> FileSource:
    """Files landed under `<landing>/<folder>/`, parsed with `schema` (print one with `tributary infer`).

    `archive=True` moves each file to `<home>/archive/<folder>/` once the batch that read it is committed.
    """
    return FileSource(
        folder,
        format,
        schema,
        max_files_per_trigger=max_files_per_trigger,
        options=tuple(sorted((options or {}).items())),
        schema_evolution=schema_evolution,
        reject_file_ratio=reject_file_ratio,
        archive=archive,
    )


def kafka(
    *topics: str,
    format: Literal["json", "csv", "raw"] = "json",
    schema: StructType | None = None,
    pattern: str | None = None,
    max_offsets_per_batch: int = 100_000,
    fail_on_data_loss: bool = True,
    options: dict[str, str] | None = None,
    schema_evolution: SchemaEvolution = "rescue",
) -> KafkaSource:
    """Messages of Kafka `topics` (or the topics matching `pattern`), each value parsed with `schema` (docs/kafka.md).

    The brokers come from `TRIBUTARY_KAFKA_BOOTSTRAP`; `options` are librdkafka consumer settings of this source.
    `format="raw"` keeps each value as text in a `value` column (no schema needed).
    """
    if schema is None:
        if format != "raw":
            raise DeclarationError(f"{place(depth=2)}: kafka(...) with format={format!r} needs schema=")
        schema = StructType([StructField("value", StringType())])
    return KafkaSource(
        topics=tuple(topics),
        format=format,
        schema=schema,
        pattern=pattern,
        max_offsets_per_batch=max_offsets_per_batch,
        fail_on_data_loss=fail_on_data_loss,
        options=tuple(sorted((options or {}).items())),
        schema_evolution=schema_evolution,
    )


def setting(name: str, default: str) -> str:
    """The value of the `TRIBUTARY_<NAME>` variable (or `default`): for choices a dataset makes per deployment,
    e.g. `kafka(...) if tb.setting("EVENTS_SOURCE", "files") == "kafka" else files(...)`."""
    return os.environ.get(f"TRIBUTARY_{name.upper()}") or default


def watermark(column: str, delay: str, earliest: str = "1970-01-01", max_future: str = "1 day") -> Watermark:
    """Event time and how late rows may come before windows close (rows Spark would drop go to the late table)."""
    return Watermark(column, delay, earliest, max_future)


def _description(fn: Callable[..., Any] | None, given: str | None) -> str:
    if given:
        return given
    doc = inspect.getdoc(fn) if fn is not None else None
    return " ".join(doc.split("\n\n")[0].split()) if doc else ""


def _options(options: dict[str, Any], where: str) -> dict[str, Any]:
    write = options.pop("write", None) or append()
    if not isinstance(write, Kind):
        raise DeclarationError(
            f"{where}: write={write!r} is not a write kind; use append(), dedupe(...), recompute(...), "
            "upsert(...), replace() or cdc(...) from pipelines.authoring"
        )
    wm = options.get("watermark")
    if isinstance(wm, dict):
        options["watermarks"] = tuple((name, _watermark(value, where)) for name, value in wm.items())
        options.pop("watermark")
    elif wm is not None:
        options["watermark"] = _watermark(wm, where)
    for name in ("keys", "partition_by"):
        value = options.get(name)
        if isinstance(value, str):
            options[name] = (value,)
        elif value is not None:
            options[name] = tuple(value)
    table_format = options.get("format")
    if table_format is not None and table_format not in TABLE_FORMATS:
        raise DeclarationError(f"{where}: format={table_format!r} is not a table format; use one of {TABLE_FORMATS}")
    options["checks"] = tuple(options.get("checks") or ())
    if options.get("serve") not in (None, True, False):
        raise DeclarationError(f"{where}: serve={options['serve']!r} must be True or False")
    if options.get("maintenance") is None:
        options["maintenance"] = MaintenancePolicy()
    return {"write": write, **{k: v for k, v in options.items() if v is not None}}


def _watermark(value: Any, where: str) -> Watermark:
    """A declared watermark: `tb.watermark(...)` or a `(column, delay)` tuple."""
    if isinstance(value, Watermark):
        return value
    if isinstance(value, tuple) and len(value) in (2, 3, 4) and all(isinstance(v, str) for v in value):
        return Watermark(*value)
    raise DeclarationError(
        f"{where}: watermark={value!r} is not a watermark; use tb.watermark('event_time', '10 minutes'), or one "
        "per stream parameter: watermark={'clicks': tb.watermark('click_time', '5 minutes'), ...}"
    )


def _check_watermarks(declaration: Declaration) -> None:
    """Per-stream watermarks name stream parameters of the function."""
    streams = [p.name for p in declaration.params if not p.static]
    for name, _ in declaration.watermarks:
        if name not in streams:
            raise declaration.error(
                f"watermark names {name!r}, which is not a stream parameter of the function",
                f"key the watermarks by the stream parameters: {', '.join(streams) or '(none)'}",
            )


def _declare(layer: Layer, fn: Callable[..., Any], options: dict[str, Any]) -> Callable[..., Any]:
    where = place(fn)
    name = options.pop("name", None) or fn.__name__
    description = _description(fn, options.pop("description", None))
    source = options.pop("source", None)
    parameters = list(inspect.signature(fn).parameters.values())
    if source is not None:
        if not (isinstance(source, Source) and source.ingests):
            raise DeclarationError(
                f"{where}: source= takes files(...), kafka(...) or delta_changes(...); tables are read through "
                "parameters"
            )
        if len(parameters) != 1:
            raise DeclarationError(f"{where}: a function over landed files takes one parameter, the landed rows")
        params: tuple[Param, ...] = ()
    else:
        params = tuple(Param(p.name, table_of_param(p.name, where), p.default is static) for p in parameters)
        if not any(not p.static for p in params):
            raise DeclarationError(
                f"{where}: the function reads no stream; name the tables it reads as parameters "
                "(e.g. `def events(bronze_events)`), or read landed files with source=files(...)"
            )
    declaration = Declaration(
        name=f"{layer}.{name}",
        layer=layer,
        fn=fn,
        where=where,
        module=fn.__module__,
        params=params,
        source=source,
        rules=tuple(getattr(fn, _RULES, ())),
        description=description,
        **_options(options, where),
    )
    _check_watermarks(declaration)
    record(declaration)
    setattr(fn, _DECLARED, declaration.name)
    return fn


def _layer(layer: Layer) -> Callable[..., Any]:
    def decorator(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
        if fn is not None:
            return _declare(layer, fn, options)
        return lambda f: _declare(layer, f, dict(options))

    decorator.__name__ = layer
    decorator.__doc__ = (
        f"Declare a {layer} table from the decorated function. Options: name, write (a kind; default append()), "
        "source (files(...) or kafka(...)), keys, watermark, late (a `<table>_late` table for the rows Spark would "
        "drop as late), partition_by, schema (a contract), checks (dataset expectations), description, maintenance, "
        "format ('iceberg' or 'delta'; default TRIBUTARY_TABLE_FORMAT), serve (publish into the serving "
        "PostgreSQL; default: gold tables)."
    )
    return decorator


bronze = _layer("bronze")
silver = _layer("silver")
gold = _layer("gold")


def landing(table: str, source: Source, **options: Any) -> None:
    """Declare a table that keeps landed files or Kafka messages as read (no function): e.g.
    `landing("bronze.events", files(...))` or `landing("bronze.events", kafka("events", schema=...))`."""
    where = place(depth=2)
    layer, _, name = table.partition(".")
    if layer not in ("bronze", "silver", "gold") or not name:
        raise DeclarationError(f"{where}: landing({table!r}): name the table <layer>.<table>, e.g. 'bronze.events'")
    if not (isinstance(source, Source) and source.ingests):
        raise DeclarationError(
            f"{where}: landing({table!r}) reads files(...), kafka(...) or delta_changes(...), got {source!r}"
        )
    description = _description(None, options.pop("description", None))
    record(
        Declaration(
            name=table,
            layer=layer,  # type: ignore[arg-type]
            fn=None,
            where=where,
            module=caller_module(),
            source=source,
            description=description,
            **_options(options, where),  # type: ignore[arg-type]
        )
    )


def flow(table: str, source: Source, *, name: str | None = None, once: bool = False) -> None:
    """Add a flow into `table`, a table declared with `landing(...)` or `source=`: its rows are appended with
    the table's, with the flow's own checkpoint and numbers, e.g. a second producer's folder, or with
    `once=True` a historical backfill read exactly once, e.g. `flow("bronze.orders", files("orders_2019", ...),
    once=True)`. `name` defaults to the source's folder or topics."""
    where = place(depth=2)
    if not (isinstance(source, Source) and source.ingests):
        raise DeclarationError(f"{where}: flow({table!r}) reads files(...), kafka(...) or delta_changes(...)")
    label = name or getattr(source, "dataset", "")
    if not label or not label.replace("-", "_").replace(".", "_").replace(",", "_").isidentifier():
        raise DeclarationError(f"{where}: flow({table!r}) needs name= (letters, digits and _)")
    FLOWS.append(FlowDeclaration(table, label, source, once, where, caller_module()))


def _expect(action: Action) -> Callable[..., Any]:
    def expectation(name: str | Rule, condition: str = "", description: str = "") -> Callable[..., Any]:
        rule = replace(name, action=action) if isinstance(name, Rule) else Rule(name, condition, action, description)

        def attach(fn: Callable[..., Any]) -> Callable[..., Any]:
            if hasattr(fn, _DECLARED):
                raise DeclarationError(
                    f"{place(fn)}: @expect… {rule.name!r} sits above the table decorator; put the table decorator first"
                )
            setattr(fn, _RULES, (rule, *getattr(fn, _RULES, ())))
            return fn

        return attach

    return expectation


expect = _expect("warn")
expect_or_quarantine = _expect("quarantine")
expect_or_fail = _expect("fail")
