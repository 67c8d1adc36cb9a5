"""Reading a streaming query's analyzed plan: which rows its stateful operators drop, and what it groups by.

Spark drops an input row of a watermarked query inside the first stateful operator the row reaches, when the
operator's event-time value for that row is at or before the watermark for late events:

* an aggregation grouped by a time window judges the window's end (`window(t, size, slide)`: a row is dropped
  from each of its windows that ended; `session_window(t, gap)`: the row's own session `[t, t + gap)`);
* an aggregation grouped by the watermarked time column itself judges that column;
* a stream-stream join, `flatMapGroupsWithState`/`applyInPandasWithState` with an event-time timeout and a
  streaming de-duplication judge the watermarked time column of their input;
* an aggregation grouped by no event-time column drops nothing (the query keeps every group forever).

`late_bounds` reads these rules off the plan Spark analyzed for the query and returns, for each input of the
query, one expression per operator the input reaches: the row is dropped only when every one of them is at or
before the watermark (a row of a sliding window reaches output while its newest window is open). The
expressions are the plan's own (Spark's window arithmetic), rewritten onto the input's columns, so they hold
for any window the author wrote. What cannot be read this way falls back to the input's time column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

DELAY_KEY = "spark.watermarkDelayMs"  # Spark's metadata key on a column that carries a watermark
_AGGREGATES = {"Aggregate"}
_JOINS = {"Join"}
_KEYED_STATE = {"FlatMapGroupsWithState", "FlatMapGroupsInPandasWithState"}
_DEDUPLICATES = {"Deduplicate", "DeduplicateWithinWatermark"}


def _kind(obj: Any) -> str:
    return obj.getClass().getSimpleName()


def _seq(seq: Any) -> list[Any]:
    return [seq.apply(i) for i in range(seq.size())]


def _watermarked(attribute: Any) -> bool:
    return _kind(attribute) == "AttributeReference" and attribute.metadata().contains(DELAY_KEY)


def _expr_id(expression: Any) -> int:
    return int(expression.exprId().id())


@dataclass
class _Operator:
    """A stateful operator of the plan, one input side of it, and the attribute its late-row filter judges."""

    kind: str
    side: Any  # the logical plan below the operator on this side
    judged: Any | None  # the attribute (None: this side's rows are never dropped)


def _stateful(plan: Any) -> list[_Operator]:
    """Every (stateful operator, input side) of the plan whose side holds no further stateful operator."""
    out: list[_Operator] = []

    def visit(node: Any) -> bool:  # True when the subtree holds a stateful operator
        children = _seq(node.children())
        below = [visit(child) for child in children]
        sides = _sides(node)
        out.extend(_Operator(_kind(node), children[i], judged) for i, judged in sides if not below[i])
        return bool(sides) or any(below)

    visit(plan)
    return out


def _sides(node: Any) -> list[tuple[int, Any | None]]:
    """(child index, judged attribute) of each input side of a stateful operator; [] for any other node."""
    kind = _kind(node)
    if not node.isStreaming():
        return []
    if kind in _AGGREGATES:
        keys = [e for e in _seq(node.groupingExpressions()) if _watermarked(e)]
        return [(0, keys[0] if keys else None)]
    if kind in _JOINS:
        children = _seq(node.children())
        if not all(c.isStreaming() for c in children):
            return []  # a stream-static join keeps no state
        return [(i, _first_watermarked(c)) for i, c in enumerate(children)]
    if kind in _KEYED_STATE:
        event_time = node.timeout().getClass().getSimpleName().startswith("EventTimeTimeout")
        return [(0, _first_watermarked(node.child()) if event_time else None)]
    if kind in _DEDUPLICATES:
        return [(0, _first_watermarked(node.child()))]
    return []


def _first_watermarked(plan: Any) -> Any | None:
    return next((a for a in _seq(plan.output()) if _watermarked(a)), None)


class _Unreadable(Exception):
    """The bound cannot be written on the inputs' columns (the caller falls back to the time column)."""


class _Definitions:
    """Where each attribute of a subtree comes from: an alias in a projection, or one value per Expand row."""

    def __init__(self, plan: Any, jvm: Any) -> None:
        self.jvm = jvm
        self.single: dict[int, Any] = {}
        self.expanded: dict[int, list[Any]] = {}
        self._collect(plan)

    def _collect(self, node: Any) -> None:
        kind = _kind(node)
        if kind == "Project":
            for item in _seq(node.projectList()):
                if _kind(item) == "Alias":
                    self.single[_expr_id(item)] = item.child()
        elif kind == "Expand":
            output = _seq(node.output())
            rows = [_seq(p) for p in _seq(node.projections())]
            for i, attribute in enumerate(output):
                self.expanded[_expr_id(attribute)] = [row[i] for row in rows]
        for child in _seq(node.children()):
            self._collect(child)

    def values(self, attribute: Any, inputs: set[int]) -> list[Any]:
        """The expressions (on input columns) of the operator's event-time value: a window's end, or the time."""
        current = attribute
        while _kind(current) == "AttributeReference" and _expr_id(current) not in inputs:
            key = _expr_id(current)
            if key in self.expanded:
                return [self.inline(_end_of(v), inputs) for v in self.expanded[key]]
            if key not in self.single:
                raise _Unreadable(current.toString())
            current = self.single[key]
        return [self.inline(_end_of(current), inputs)]

    def inline(self, expression: Any, inputs: set[int]) -> Any:
        """`expression` with every attribute defined inside the subtree replaced by its definition."""
        if _kind(expression) == "AttributeReference":
            key = _expr_id(expression)
            if key in inputs:
                return expression
            if key in self.single:
                return self.inline(self.single[key], inputs)
            raise _Unreadable(expression.toString())
        children = _seq(expression.children())
        if not children:
            return expression
        rewritten = [self.inline(c, inputs) for c in children]
        if all(a is b or a.equals(b) for a, b in zip(rewritten, children, strict=True)):
            return expression
        return expression.withNewChildren(self.jvm.org.apache.spark.api.python.PythonUtils.toSeq(rewritten))


def _end_of(expression: Any) -> Any:
    """A window struct's `end` value (Spark's TimeWindowing and SessionWindowing build `named_struct`)."""
    if _kind(expression) != "CreateNamedStruct":
        return expression
    names = [str(n.toString()) for n in _seq(expression.nameExprs())]
    if "end" not in names:
        raise _Unreadable(expression.toString())
    return _seq(expression.valExprs())[names.index("end")]


def late_bounds(out: DataFrame, inputs: list[DataFrame], time_columns: list[str | None]) -> list[list[Column]]:
    """For each input of the query `out` (built from `inputs`), the Columns (on the input) Spark judges it by.

    A row of input i is dropped when every Column of `result[i]` is at or before the watermark; an empty list
    means its rows are never dropped. `time_columns[i]` is input i's watermarked time column (None for a static
    input, which is never late); a bound that cannot be written on the input's columns falls back to it.
    """
    from py4j.protocol import Py4JError
    from pyspark.sql import functions as F

    try:
        return _late_bounds(out, inputs, time_columns)
    except Py4JError:  # a plan shape this reader does not know: judge each stream by its time column
        return [[F.col(time)] if time else [] for time in time_columns]


def _late_bounds(out: DataFrame, inputs: list[DataFrame], time_columns: list[str | None]) -> list[list[Column]]:
    from pyspark.sql import Column
    from pyspark.sql import functions as F

    jvm = out.sparkSession._jvm
    plan = out._jdf.queryExecution().analyzed()
    ids = [{_expr_id(a) for a in _seq(df._jdf.queryExecution().analyzed().output())} for df in inputs]
    found: list[list[Column] | None] = [[] for _ in inputs]  # None: some operator keeps every row of the input
    for operator in _stateful(plan):
        reached = _reached(operator.side, ids)
        if operator.judged is None:
            for i in reached:
                found[i] = None
            continue
        definitions = _Definitions(operator.side, jvm)
        for i in reached:
            if found[i] is None:
                continue
            try:
                values = definitions.values(operator.judged, ids[i])
                found[i].extend(Column(jvm.org.apache.spark.sql.classic.ExpressionUtils.column(v)) for v in values)
            except _Unreadable:
                found[i].append(F.col(time_columns[i]) if time_columns[i] else F.lit(None))
    return [columns if columns and time_columns[i] else [] for i, columns in enumerate(found)]


def _reached(side: Any, ids: list[set[int]]) -> list[int]:
    """The inputs whose columns occur in `side` (a query input is a leaf relation of the plan)."""
    seen: set[int] = set()

    def visit(node: Any) -> None:
        seen.update(_expr_id(a) for a in _seq(node.output()))
        for child in _seq(node.children()):
            visit(child)

    visit(side)
    return [i for i, input_ids in enumerate(ids) if input_ids & seen]


def grouped_without_event_time(df: DataFrame) -> list[str] | None:
    """The group columns of the first streaming aggregation that groups by no event-time column, if any."""

    def visit(node: Any) -> list[str] | None:
        if _kind(node) in _AGGREGATES and node.isStreaming():
            keys = _seq(node.groupingExpressions())
            if not any(_watermarked(k) for k in keys):
                return [str(k.sql()) for k in keys]
        return next((found for c in _seq(node.children()) if (found := visit(c)) is not None), None)

    return visit(df._jdf.queryExecution().analyzed())


def has_watermark(df: DataFrame) -> bool:
    """Whether any input of the query carries a watermark."""

    def visit(node: Any) -> bool:
        return _kind(node) == "EventTimeWatermark" or any(visit(c) for c in _seq(node.children()))

    return visit(df._jdf.queryExecution().analyzed())
