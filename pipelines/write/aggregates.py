"""Incremental aggregates: when a recompute table's function is a group-by whose stored rows can absorb a batch's.

A gold function such as `orders.groupBy("day", "region").agg(F.count(...), F.sum("amount"))` gives, on a batch of
new upstream rows, a partial aggregate per group; merged into the stored row column by column (counts and sums
added, minimums and maximums kept), it gives what recomputing the group from every upstream row gives, to the last
digit, because each of those aggregates of a union is the same aggregate of its parts' results. That holds only for
a function that is, in its analyzed plan (`combinations`):

- one `Aggregate` at the top (under nothing but a projection of its own columns), grouped by plain columns that
  are exactly the table's keys, each output a grouping column or one aggregate;
- each aggregate `count`, `sum` of integers or decimals of at most 37 digits (a sum of floats depends on the order
  it adds in), `min` or `max`, neither `DISTINCT` nor with a `FILTER`, possibly cast to a type that keeps its
  values (`_exact_cast`);
- over projections and filters only, all deterministic and without subqueries, of the one upstream relation.

Anything else (an average, a distinct count, a join, a window, a float sum) is recomputed as before. Whether the
stored rows hold exactly the upstream rows of the batches up to some batch is recorded in each commit that writes
them (`AggregatedThrough`); `pipelines.write.sinks.IncrementalAggregateSink` decides from it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame

# The snapshot-summary (Iceberg) or commit-info (Delta) key of the commit's `AggregatedThrough`.
AGGREGATED_THROUGH = "tributary.aggregated-through"

_COMBINABLE = {"count", "sum", "min", "max"}
# Row-wise plan nodes a group-by of a union distributes over.
_ROW_WISE = {"Project", "Filter", "SubqueryAlias"}
_EXACT_SUM_INPUTS = ("byte", "short", "integer", "long", "decimal")


def combinations(df: DataFrame, keys: tuple[str, ...]) -> dict[str, str] | None:
    """Per output column that is not a key, how a batch's value combines with the stored one (`count`, `sum`,
    `min`, `max`); None when `df`'s plan is not a group-by of such aggregates by exactly `keys` (module
    docstring)."""
    plan: Any = df._jdf.queryExecution().analyzed()
    ansi = df.sparkSession.conf.get("spark.sql.ansi.enabled", "true") == "true"
    outputs = [_name(a) for a in _items(plan.output())]
    if plan.nodeName() == "Project":
        if not all(e.getClass().getSimpleName() == "AttributeReference" for e in _items(plan.projectList())):
            return None
        plan = plan.child()
    if plan.nodeName() != "Aggregate" or not _row_wise(plan.child()):
        return None
    grouping = list(_items(plan.groupingExpressions()))
    if any(g.getClass().getSimpleName() != "AttributeReference" for g in grouping):
        return None
    if sorted(_name(g) for g in grouping) != sorted(keys):
        return None
    combine: dict[str, str] = {}
    for expression in _items(plan.aggregateExpressions()):
        kind = expression.getClass().getSimpleName()
        if kind == "AttributeReference" and _name(expression) in keys:
            continue
        how = _combinable(expression, ansi) if kind == "Alias" else None
        if how is None:
            return None
        combine[_name(expression)] = how
    if set(outputs) != set(keys) | set(combine) or len(outputs) != len(keys) + len(combine):
        return None
    return {name: combine[name] for name in outputs if name in combine}


def _combinable(alias: Any, ansi: bool) -> str | None:
    aggregate = alias.child()
    if aggregate.getClass().getSimpleName() == "Cast":
        if not _exact_cast(aggregate.child().dataType(), aggregate.dataType(), ansi):
            return None
        aggregate = aggregate.child()
    if aggregate.getClass().getSimpleName() != "AggregateExpression":
        return None
    if aggregate.isDistinct() or aggregate.filter().isDefined():
        return None
    function = aggregate.aggregateFunction()
    name = function.prettyName()
    if name not in _COMBINABLE:
        return None
    if name == "sum" and not function.child().dataType().typeName().startswith(_EXACT_SUM_INPUTS):
        return None
    stored = alias.dataType()
    if name == "sum" and str(stored.typeName()).startswith("decimal") and int(stored.precision()) > 37:
        return None  # stored + batch would pass Spark's 38 digits, where it may round to a smaller scale
    if not all(child.deterministic() for child in _items(function.children())):
        return None
    return name


# Integer types by the decimal digits their values can need.
_INTEGER_DIGITS = {"byte": 3, "short": 5, "integer": 10, "long": 19}


def _exact_cast(source: Any, target: Any, ansi: bool) -> bool:
    """Whether the cast of a number from `source` to `target` commutes with combining: it keeps every value (an
    integer to a wider integer or to a decimal with as many integer digits, a decimal to one with no fewer integer
    digits and no smaller scale), or, under ANSI mode, fails on a value it cannot keep (then any integer to
    integer or decimal, and any decimal to a decimal of no smaller scale). Without ANSI mode a narrowing cast gives
    NULL for a part that does not fit where the whole might, so it is not combined."""
    source_name, target_name = str(source.typeName()), str(target.typeName())
    if source_name in _INTEGER_DIGITS:
        digits, scale = _INTEGER_DIGITS[source_name], 0
    elif source_name.startswith("decimal"):
        digits, scale = int(source.precision()) - int(source.scale()), int(source.scale())
    else:
        return False
    if target_name in _INTEGER_DIGITS:
        return scale == 0 and (ansi or (_INTEGER_DIGITS[target_name] >= digits and source_name in _INTEGER_DIGITS))
    if not target_name.startswith("decimal") or int(target.scale()) < scale:
        return False
    return ansi or int(target.precision()) - int(target.scale()) >= digits


def _row_wise(plan: Any) -> bool:
    """Whether `plan` is row-wise, deterministic and subquery-free down to one leaf."""
    while plan.children().size() == 1:
        if plan.nodeName() not in _ROW_WISE or not _plain(plan):
            return False
        plan = plan.children().apply(0)
    return plan.children().size() == 0 and plan.subqueries().isEmpty()


def _plain(plan: Any) -> bool:
    return plan.subqueries().isEmpty() and all(e.deterministic() for e in _items(plan.expressions()))


def _items(seq: Any) -> list[Any]:
    return [seq.apply(i) for i in range(seq.size())]


def _name(expression: Any) -> str:
    return str(expression.name())


def merge_sets(combine: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The MERGE assignments (`t.` stored, `s.` batch) that fold a batch's partial rows into the stored ones."""
    folds = {
        "count": "t.{c} + s.{c}",
        # A sum over no value is NULL: then the other side alone, else both added (an overflow stays an overflow).
        "sum": "CASE WHEN t.{c} IS NULL THEN s.{c} WHEN s.{c} IS NULL THEN t.{c} ELSE t.{c} + s.{c} END",
        "min": "least(t.{c}, s.{c})",
        "max": "greatest(t.{c}, s.{c})",
    }
    return tuple((column, folds[how].format(c=column)) for column, how in combine.items())


def fingerprint(keys: tuple[str, ...], combine: Mapping[str, str]) -> str:
    """Names the aggregate's shape: stored rows written under another one are not combined with."""
    return hashlib.sha256(json.dumps([list(keys), sorted(combine.items())]).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class AggregatedThrough:
    """What a commit's stored rows were aggregated from: no row of `upstream` (its table id) whose batch column is
    after `through`, in the shape `shape` (`fingerprint`). A batch whose rows all come after `through` is new to
    them, so its partial aggregate can be folded in."""

    upstream: str
    through: int
    shape: str

    def property(self) -> dict[str, str]:
        """As the commit property that records it."""
        value = {"upstream": self.upstream, "through": self.through, "shape": self.shape}
        return {AGGREGATED_THROUGH: json.dumps(value)}

    @classmethod
    def read(cls, properties: Mapping[str, str] | None) -> AggregatedThrough | None:
        """From a commit's properties (None when absent or unreadable)."""
        text = (properties or {}).get(AGGREGATED_THROUGH)
        try:
            value = json.loads(text) if text else None
            return cls(str(value["upstream"]), int(value["through"]), str(value["shape"])) if value else None
        except (ValueError, KeyError, TypeError):
            return None
