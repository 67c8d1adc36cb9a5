"""What an author declares: one `Declaration` per table, recorded by the decorators and collected per dataset.

A declaration knows where it was written (file, line, function) so every error about it can name the place.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infra.errors import ConfigError
from pipelines.spec.sources import Source, Watermark
from pipelines.spec.tables import LAYERS, Layer, MaintenancePolicy

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from pipelines.spec.expectations import Expectation
    from pipelines.spec.rules import Rule
    from pipelines.spec.strategy import Sink
    from pipelines.spec.tables import OutputTable


class DeclarationError(ConfigError):
    """A table declaration that cannot be built; the message names the file, line and function, and the fix."""


@dataclass(frozen=True)
class Built:
    """What a kind contributes to a `TableSpec`."""

    sink: Sink
    output_mode: str = "append"
    extra_outputs: tuple[OutputTable, ...] = ()
    checks: tuple[Expectation, ...] = ()


class Kind:
    """A declared write strategy."""

    keys: tuple[str, ...] = ()
    # Whether the kind applies row rules (`expect_or_quarantine` and friends) and owns a quarantine table.
    validates = False
    # Whether the function runs on the touched rows of its upstream read whole, not on the stream.
    recomputes = False
    # Whether the kind can take a row back, so that it can read a table that updates and deletes rows
    # (`Sink.follow`); the others are refused downstream of one.
    follows_changes = False

    def transform(self, d: Declaration, rules: tuple[Rule, ...], call: Callable[..., DataFrame]) -> Callable:
        """The streaming transform: `call` (the author's function over the inputs) as the kind needs it."""
        return call

    def finish(self, d: Declaration, schema: StructType) -> StructType:
        """The table's schema from the schema of the transform's output."""
        return schema

    def build(self, d: Declaration, output: OutputTable, rules: tuple[Rule, ...], call: Callable) -> Built:
        """The sink, output mode, extra tables and default checks of this kind."""
        raise NotImplementedError


@dataclass(frozen=True)
class Param:
    """One input of a table function: the parameter, the table it names, and whether it is read whole."""

    name: str
    table: str
    static: bool


@dataclass
class Declaration:
    """One declared table, as the author wrote it (built into a `TableSpec` by `pipelines.authoring.build`)."""

    name: str
    layer: Layer
    fn: Callable[..., Any] | None
    where: str
    module: str
    write: Kind
    params: tuple[Param, ...] = ()
    source: Source | None = None
    keys: tuple[str, ...] = ()
    # One watermark for every stream the function reads, or one per stream parameter (`watermarks`).
    watermark: Watermark | None = None
    watermarks: tuple[tuple[str, Watermark], ...] = ()
    late: bool = False
    partition_by: tuple[str, ...] = ()
    schema: StructType | None = None
    checks: tuple[Expectation, ...] = ()
    rules: tuple[Rule, ...] = ()
    description: str = ""
    maintenance: MaintenancePolicy = field(default_factory=MaintenancePolicy)
    format: str | None = None  # "iceberg" or "delta"; None: the home's TRIBUTARY_TABLE_FORMAT
    serve: bool | None = None  # published into the serving database; None: gold tables are
    flows: tuple[FlowDeclaration, ...] = ()  # more flows into this table (`tb.flow`), attached when datasets load

    @property
    def streams(self) -> tuple[str, ...]:
        """The tables this one reads as streams, in parameter order."""
        return tuple(p.table for p in self.params if not p.static)

    @property
    def statics(self) -> tuple[str, ...]:
        """The reference tables this one reads whole, in parameter order."""
        return tuple(p.table for p in self.params if p.static)

    @property
    def watermarked(self) -> bool:
        """Whether any stream the function reads has a watermark."""
        return self.watermark is not None or bool(self.watermarks)

    def watermark_for(self, param: Param) -> Watermark | None:
        """The watermark of one stream parameter: its own, or the one declared for every stream."""
        if self.watermarks:
            return dict(self.watermarks).get(param.name)
        return self.watermark

    def error(self, problem: str, fix: str) -> DeclarationError:
        """A DeclarationError naming this declaration's place, the problem and the fix."""
        return DeclarationError(f"{self.where}: table {self.name!r}: {problem}; {fix}")


@dataclass(frozen=True)
class FlowDeclaration:
    """A further flow into a declared table (`tb.flow`), as the author wrote it."""

    target: str
    name: str
    source: Source
    once: bool
    where: str
    module: str


# Every declaration made in this process, in order; `pipelines.authoring.discover` takes those of a dataset.
DECLARED: list[Declaration] = []
FLOWS: list[FlowDeclaration] = []


def record(declaration: Declaration) -> None:
    """Keep `declaration`; a module imported again (a reload) replaces its own earlier declaration."""
    for i, old in enumerate(DECLARED):
        if old.module == declaration.module and old.where == declaration.where:
            DECLARED[i] = declaration
            return
    DECLARED.append(declaration)


def place(fn: Callable[..., Any] | None = None, depth: int = 2) -> str:
    """`file:line, function f` for `fn`, or the caller's `file:line` `depth` frames up; paths relative to the cwd."""
    if fn is not None:
        code = inspect.unwrap(fn).__code__
        return f"{short_path(code.co_filename)}:{code.co_firstlineno}, function {fn.__name__}"
    frame = inspect.stack()[depth]
    return f"{short_path(frame.filename)}:{frame.lineno}"


def short_path(filename: str) -> str:
    path = Path(filename).resolve()
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def table_of_param(param: str, where: str) -> str:
    """The table a function parameter names: `silver_events` reads `silver.events`."""
    layer, sep, table = param.partition("_")
    if not sep or layer not in LAYERS or not table:
        raise DeclarationError(
            f"{where}: parameter {param!r} does not name a table; name each input <layer>_<table>, "
            "e.g. `def daily_revenue(silver_events)` reads silver.events"
        )
    return f"{layer}.{table}"


def caller_module(depth: int = 2) -> str:
    """The module name of the code `depth` frames up (where a declaration without a function was made)."""
    frame = inspect.stack()[depth].frame
    return str(frame.f_globals.get("__name__", "__main__"))
