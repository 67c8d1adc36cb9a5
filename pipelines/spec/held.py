"""Row expectations a writer proves on the rows it writes, kept in the same commit as the rows.

A validating sink already makes one aggregation over each batch (its rule counts). Counting there, over the
batch's valid rows, the rows that would fail each of the table's row expectations costs a few sums more; the
rows it writes are among those valid rows, so an expectation no valid row fails holds on every written row.
The commit records which ones held (`HELD_PROPERTY`: their fingerprints), and a check reads that instead of
scanning the rows again (`quality.gx_runner`). Only expectations with no row allowed to fail can be proven this
way; one that some valid row fails is left to Great Expectations, which then counts exactly which written rows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipelines.spec.expectations import Expectation

HELD_PROPERTY = "tributary.expectations-held"
# Kinds whose failing rows a writer counts in its batch aggregation (`violation`).
COUNTED_KINDS = frozenset({"not_null", "in_set", "between"})


def fingerprint(exp: Expectation) -> str:
    """A short, stable name of an expectation and its parameters: a changed expectation is another one."""
    return hashlib.sha256(repr(exp).encode()).hexdigest()[:16]


def countable(exp: Expectation, columns: Iterable[str]) -> bool:
    """Whether a writer can count `exp`'s failing rows in a batch holding `columns` (every row must pass)."""
    return exp.kind in COUNTED_KINDS and exp.mostly == 1.0 and set(exp.columns) <= set(columns)


def violation(exp: Expectation) -> Column:
    """TRUE for a row that `exp` does not accept, as Great Expectations judges it: a missing value fails
    `not_null` only; `in_set` and `between` judge present values. Anything not clearly accepted counts as failing
    (a comparison that yields NULL), so a count of zero is a proof."""
    column = F.col(exp.column)
    if exp.kind == "not_null":
        return column.isNull()
    if exp.kind == "in_set":
        accepted = column.isin(list(exp.values))
    else:
        accepted = F.lit(True)
        if exp.min_value is not None:
            accepted = accepted & (column >= F.lit(exp.min_value))
        if exp.max_value is not None:
            accepted = accepted & (column <= F.lit(exp.max_value))
    return column.isNotNull() & ~F.coalesce(accepted, F.lit(False))


def held_property(fingerprints: Iterable[str]) -> dict[str, str]:
    """The commit property naming the expectations that held on every row the commit writes."""
    return {HELD_PROPERTY: ",".join(sorted(set(fingerprints)))}


def held_in(summary: Mapping[str, str | None]) -> frozenset[str]:
    """The fingerprints a commit's summary records as held (none for a commit that records nothing)."""
    value = summary.get(HELD_PROPERTY)
    return frozenset(value.split(",")) - {""} if value else frozenset()
