"""Run a table's expectations with Great Expectations 1.x on the Spark DataFrame of the table.

One ephemeral GX context and Spark data source per check run, whole-DataFrame batches. The table is read at
its current snapshot (pinned, so the numbers refer to one table version) and nothing is cached: GX bundles the
metrics into a few aggregates, each reads only the columns it names from Parquet, and row counts and maxima come
from table metadata where the format keeps them. Caching the columns first cost more than the scans it saved (on
1 M rows, 4.2 s against 3.8 s warm) and held the table in memory.
Great Expectations is imported inside the functions: it takes seconds to import and only checks need it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from infra.errors import ConfigError, PipelineError
from infra.settings import Settings
from infra.spark import Session, running_session, started_session
from pipelines.io.formats import table_format
from pipelines.spec.expectations import GX_KINDS, ROW_KINDS, Expectation
from pipelines.spec.tables import TableSpec
from quality.gx_increment import TABLE_ID_STATE, held_by_commits, increment_since_passed, keys_stored_before
from quality.inputs import carried_over, digest, oldest_allowed, snapshot_version, snapshot_versions
from quality.results import MAX_SAMPLES, CheckResult, Outcome, plain

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CHECK_NAMES = {"error": "expectations", "warn": "expectations_warn"}
_META_KEY = "tributary_expectation"


def import_gx() -> None:
    """Import Great Expectations (about 2 s): run while the JVM starts so the first check does not wait for it."""
    import great_expectations.expectations  # noqa: F401


def gx_version() -> str:
    """The installed Great Expectations version (imports GX)."""
    import great_expectations as gx

    return gx.__version__


def require_table(spark: SparkSession | None, settings: Settings, table: str) -> None:
    """Raise a PipelineError saying how to create `table` when it does not exist yet (`spark` None: asked of the
    catalog without starting Spark where the format can)."""
    if not table_format(settings).exists(spark, table):
        raise PipelineError(f"table {table} does not exist yet; run the pipeline first ('tributary run {table}')")


def table_snapshot_frame(spark: SparkSession, settings: Settings, table: str) -> tuple[DataFrame, int | None, int]:
    """The table pinned at its current snapshot, that snapshot's id (None for a table never written) and its rows."""
    require_table(spark, settings, table)
    fmt = table_format(settings)
    stats = fmt.stats(spark, table)
    if stats.snapshot_id is None:
        return fmt.read(spark, table), None, 0
    return fmt.read(spark, table, stats.snapshot_id), stats.snapshot_id, stats.rows


def _to_gx(
    spark: SparkSession,
    settings: Settings,
    spec: TableSpec,
    exp: Expectation,
    upstream_rows: dict[str, int],
    detailed: bool = False,
) -> tuple[list[Any], list[str]]:
    """The GX expectations that implement `exp`, and notes on values resolved at run time (`upstream_rows` memo)."""
    import great_expectations.expectations as gxe

    notes: list[str] = []
    if exp.kind == "not_null":
        return [gxe.ExpectColumnValuesToNotBeNull(column=exp.column, mostly=exp.mostly)], notes
    if exp.kind == "unique":
        if len(exp.columns) == 1 and not detailed:
            # One aggregate (distinct / non-null count) instead of GX's per-row window over the key: much cheaper.
            # Only when it fails is the per-row expectation run, for unexpected counts and sample duplicates.
            return [gxe.ExpectColumnProportionOfUniqueValuesToBeBetween(column=exp.column, min_value=1.0)], notes
        if len(exp.columns) == 1:
            return [gxe.ExpectColumnValuesToBeUnique(column=exp.column)], notes
        return [gxe.ExpectCompoundColumnsToBeUnique(column_list=list(exp.columns))], notes
    if exp.kind == "in_set":
        return [
            gxe.ExpectColumnValuesToBeInSet(column=exp.column, value_set=list(exp.values), mostly=exp.mostly)
        ], notes
    if exp.kind == "between":
        return [
            gxe.ExpectColumnValuesToBeBetween(
                column=exp.column, min_value=exp.min_value, max_value=exp.max_value, mostly=exp.mostly
            )
        ], notes
    if exp.kind == "row_count":
        return [gxe.ExpectTableRowCountToBeBetween(min_value=exp.min_value, max_value=exp.max_value)], notes
    if exp.kind == "row_count_vs_upstream":
        assert exp.upstream is not None
        if exp.upstream not in upstream_rows:  # several expectations may compare with one upstream
            upstream_rows[exp.upstream] = table_format(settings).stats(spark, exp.upstream).rows
        rows = upstream_rows[exp.upstream]
        low = math.ceil(float(exp.min_value) * rows) if exp.min_value is not None else None
        high = math.floor(float(exp.max_value) * rows) if exp.max_value is not None else None
        notes.append(f"{exp.upstream} has {rows} rows: expected between {_open(low)} and {_open(high)}")
        return [gxe.ExpectTableRowCountToBeBetween(min_value=low, max_value=high)], notes
    if exp.kind == "fresh":
        assert exp.within is not None
        oldest = oldest_allowed(exp.within)
        notes.append(f"newest {exp.column} must be at or after {oldest.isoformat(timespec='seconds')}")
        return [gxe.ExpectColumnMaxToBeBetween(column=exp.column, min_value=oldest)], notes
    if exp.kind == "schema":
        fields = spec.output.schema.fields
        gx_list: list[Any] = [gxe.ExpectTableColumnsToMatchOrderedList(column_list=[f.name for f in fields])]
        gx_list += [gxe.ExpectColumnValuesToBeOfType(column=f.name, type_=type(f.dataType).__name__) for f in fields]
        return gx_list, notes
    raise ConfigError(f"table {spec.name}: expectation kind {exp.kind!r} is not run by Great Expectations")


def _open(value: int | None) -> str:
    return "-inf" if value is None else str(value)


def _outcome(exp: Expectation, results: list[Any], notes: list[str]) -> Outcome:
    """Fold the GX results of one expectation (several for a schema) into one outcome."""
    outcome = Outcome(name=exp.label, severity=exp.severity, success=all(r.success for r in results))
    if outcome.success and exp.kind in ROW_KINDS and exp.mostly == 1.0:
        outcome.unexpected_count, outcome.unexpected_percent = 0, 0.0  # passed with no row allowed to fail
    errors, observed = [], []
    for r in results:
        info = r.exception_info or {}
        if info.get("raised_exception"):
            errors.append(str(info.get("exception_message") or "GX raised an exception").splitlines()[0])
        res = r.result or {}
        if "element_count" in res:
            outcome.element_count = int(res["element_count"])
        if res.get("unexpected_count") is not None:
            outcome.unexpected_count = (outcome.unexpected_count or 0) + int(res["unexpected_count"])
            outcome.unexpected_percent = float(res.get("unexpected_percent") or 0.0)
            outcome.samples = [plain(v) for v in (res.get("partial_unexpected_list") or [])][:MAX_SAMPLES]
        if "observed_value" in res and (exp.kind != "schema" or not r.success):
            value = plain(res["observed_value"])
            if exp.kind == "schema" and r.expectation_config.type == "expect_column_values_to_be_of_type":
                value = f"{r.expectation_config.kwargs['column']}: {value}"
            observed.append(str(value))
    if observed:
        outcome.observed = "; ".join(observed)
    if errors:
        outcome.success = False
        outcome.error = "; ".join(errors)
    if notes and not outcome.success:
        outcome.observed = f"{outcome.observed} ({'; '.join(notes)})" if outcome.observed else "; ".join(notes)
    return outcome


@dataclass
class _Validation:
    """One GX context validating one table's expectations in parts (suites) over batches of the same table."""

    gx: Any
    context: Any
    spark: SparkSession
    settings: Settings
    spec: TableSpec
    notes: dict[int, list[str]] = field(default_factory=dict)
    upstream_rows: dict[str, int] = field(default_factory=dict)

    def run(self, batch: Any, expectations: dict[int, Expectation], part: str) -> dict[int, list[Any]]:
        """Validate `expectations` (by index) as one GX suite named after the table and `part`; results by index.

        Parts `data` and `appended` ask GX for pass/fail only (BOOLEAN_ONLY skips the Spark jobs that collect
        samples, about half of them). Part `details`, run on failed expectations (and passed freshness ones, for
        their newest value), asks for counts and samples, and turns single-column unique keys into GX's per-row
        expectation, which can name the duplicates.
        """
        gx_expectations: list[Any] = []
        for index, exp in expectations.items():
            converted, self.notes[index] = _to_gx(
                self.spark, self.settings, self.spec, exp, self.upstream_rows, detailed=part == "details"
            )
            for item in converted:
                item.meta = {_META_KEY: index}
                gx_expectations.append(item)
        suite = self.context.suites.add(
            self.gx.ExpectationSuite(name=f"{self.spec.name}:{part}", expectations=gx_expectations)
        )
        detail = "BOOLEAN_ONLY" if part in ("data", "appended") else "BASIC"
        result_format = {"result_format": detail, "partial_unexpected_count": 20}
        results: dict[int, list[Any]] = {index: [] for index in expectations}
        for r in batch.validate(suite, result_format=result_format).results:
            results[int(r.expectation_config.meta[_META_KEY])].append(r)
        return results


def validate_table(
    session: Session, settings: Settings, spec: TableSpec, df: DataFrame | None = None, deep: bool = False
) -> dict[str, CheckResult]:
    """Evaluate the spec's GX expectations on the whole table at its current snapshot (or on `df`).

    One GX validation checks the schema on an empty frame, one checks the data (pass or fail only); only when
    some fail does a third one, on those alone, count the unexpected rows and collect samples. Row expectations
    that passed at an earlier snapshot are validated on the rows appended since, when the table only appended, and
    those every commit since records as held on its rows are not validated again (`quality.gx_increment`), unless
    `deep`.

    Returns one `CheckResult` per severity present: `"error"` (the blocking check `expectations`) and `"warn"`
    (the non-blocking check `expectations_warn`). When the table, the upstreams it is compared with and the suite
    are unchanged since the latest results (`quality.inputs`), those results are returned, carried over, and
    `session` (a session, a factory or None: `infra.spark.Session`) is not started.
    """
    expectations = [e for e in spec.expectations if e.kind in GX_KINDS]
    if not expectations:
        return {}
    started = time.perf_counter()
    inputs: dict[str, str] = {}
    if df is None:
        running = running_session(session)
        upstreams = sorted({e.upstream for e in expectations if e.kind == "row_count_vs_upstream" and e.upstream})
        for table in (spec.name, *upstreams):
            require_table(running, settings, table)
        inputs = {"suite": digest(expectations), **snapshot_versions(running, settings, [spec.name, *upstreams])}
        inputs["counted"] = "rows" if deep else "commits"
        clock_dependent = {e.label: e.within for e in expectations if e.kind == "fresh" and e.within is not None}
        severities = {e.severity for e in expectations}
        carried = {s: carried_over(settings, spec.name, CHECK_NAMES[s], inputs, clock_dependent) for s in severities}
        if all(carried.values()):
            return {severity: result for severity, result in carried.items() if result is not None}
    spark = df.sparkSession if df is not None else started_session(session, settings)
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    snapshot: int | None = None
    rows: int | None = None
    if df is None:
        df, snapshot, rows = table_snapshot_frame(spark, settings, spec.name)
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    batch_definition = (
        # persist=False: GX would cache every column of each frame it is given, and never release it.
        context.data_sources.add_spark("tributary", persist=False)
        .add_dataframe_asset(spec.name.replace(".", "__"))
        .add_batch_definition_whole_dataframe("table")
    )
    validation = _Validation(gx, context, spark, settings, spec)
    by_expectation: dict[int, list[Any]] = {}
    # The schema is metadata: validated on an empty frame.
    schema = {i: e for i, e in enumerate(expectations) if e.kind == "schema"}
    data = {i: e for i, e in enumerate(expectations) if e.kind != "schema"}
    if schema:
        empty = batch_definition.get_batch(batch_parameters={"dataframe": df.limit(0)})
        by_expectation.update(validation.run(empty, schema, "schema"))
    increment, notes, state = None, [], {}
    if snapshot is not None:
        state[TABLE_ID_STATE] = table_format(settings).table_id(spark, spec.name)
    if data and inputs:
        checks = [CHECK_NAMES[s] for s in sorted({e.severity for e in expectations})]
        table_id = state.get(TABLE_ID_STATE, "")
        increment = increment_since_passed(spark, settings, spec, checks, inputs, snapshot, rows or 0, table_id)
    held = held_by_commits(spark, settings, spec, snapshot, increment) if data and not deep else None
    proven = {i: _held_outcome(e, rows) for i, e in data.items() if held is not None and held.proves(e, increment)}
    if held is not None and proven:
        data = {i: e for i, e in data.items() if i not in proven}
        notes.append(held.note(len(proven)))
    covered = {i: e for i, e in data.items() if increment is not None and increment.covers(e)}
    if increment is not None and covered:
        # Only pass or fail is needed here: on any failure the whole table is validated, for exact counts.
        on_appended = _validate_frame(validation, batch_definition, increment.rows, covered, "appended")
        passed = all(r.success for i in covered for r in on_appended[i])
        if passed and not keys_stored_before(spark, settings, spec, increment):
            by_expectation.update(on_appended)
            data = {i: e for i, e in data.items() if i not in covered}
            notes.append(increment.note(len(covered)))
    if data:
        by_expectation.update(_validate_frame(validation, batch_definition, df, data, "data"))
    outcomes = [
        proven[i] if i in proven else _outcome(e, by_expectation.get(i, []), validation.notes[i])
        for i, e in enumerate(expectations)
    ]
    if rows is None:
        rows = next((o.element_count for o in outcomes if o.element_count is not None), None)
    seconds = round(time.perf_counter() - started, 3)
    checked_at = datetime.now(UTC).isoformat(timespec="seconds")
    results = {}
    for severity, check in CHECK_NAMES.items():
        mine = [o for o, e in zip(outcomes, expectations, strict=True) if e.severity == severity]
        if mine:
            results[severity] = CheckResult(
                table=spec.name,
                check=check,
                severity=severity,
                checked_at=checked_at,
                seconds=seconds,
                outcomes=mine,
                snapshot_id=None if snapshot is None else str(snapshot),
                rows_checked=rows,
                engine=f"great_expectations {gx.__version__}",
                # Carried over later only if the snapshot validated is the one the inputs were read at.
                inputs=inputs if inputs.get(f"snapshot:{spec.name}") == snapshot_version(snapshot) else {},
                notes=notes,
                state=state,
            )
    return results


def _held_outcome(exp: Expectation, rows: int | None) -> Outcome:
    """A row expectation every row of the table meets, as its writers' commits record (`held_by_commits`)."""
    return Outcome(exp.label, exp.severity, True, element_count=rows, unexpected_count=0, unexpected_percent=0.0)


def _validate_frame(
    validation: _Validation, batch_definition: Any, df: DataFrame, data: dict[int, Expectation], part: str
) -> dict[int, list[Any]]:
    """Validate the data expectations `data` on `df`: pass or fail, then (in part `data`) the details of failed
    ones and of passed freshness ones."""
    batch = batch_definition.get_batch(batch_parameters={"dataframe": df})
    if part == "data" and not any(e.kind in ROW_KINDS for e in data.values()):
        # Table-level ones only (row counts, newest values): their details are the same aggregates, so one pass.
        return validation.run(batch, data, "details")
    results = validation.run(batch, data, part)
    if part != "data":
        return results
    failed = {i: e for i, e in data.items() if not all(r.success for r in results[i])}
    # A passed table-level expectation keeps its observed value, as when run alone above: a freshness needs its
    # newest value on record (the result is carried over while it holds), a row count shows the count.
    table_level = {i: e for i, e in data.items() if e.kind not in ROW_KINDS and i not in failed}
    if failed or table_level:
        results.update(validation.run(batch, {**failed, **table_level}, "details"))
    return results
