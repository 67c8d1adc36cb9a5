"""Asset checks generated from the registry: Great Expectations suites, reconciliations and landed files.

Per table with expectations, one multi-asset check runs one GX validation and reports two checks:
`expectations` (the `error` expectations; blocking: a failure stops the assets downstream in the run) and
`expectations_warn` (the `warn` ones; recorded, the run goes on). Per pipeline, `reconciliation` on the
validating (silver) table accounts for every landed line (blocking), and on each table declaring
`totals_match_upstream` compares its totals with its upstream. Every result is persisted under the home and
the Markdown report is rewritten, so the latest results are readable without Dagster.

Per file-source table, one multi-asset check reads `<table>_files` once and reports `landed_files` (blocking:
fails while a rejected landed file is not acknowledged, naming each file, its reason and the
`tributary files ack` command) and `landed_files_warn` (non-blocking: names the empty and header-only files the
table has recorded; like the GX warn checks it judges the whole table, not only the latest run).
"""

# No `from __future__ import annotations`: Dagster reads the resource annotations at definition time.
from collections.abc import Iterator

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    MetadataValue,
    asset_check,
    multi_asset_check,
)

from infra.settings import Settings
from infra.spark import Session, while_jvm_starts
from orchestration.assets import asset_key
from orchestration.metadata import as_metadata
from orchestration.resources import SparkResource
from pipelines.ops.file_review import WARNING_STATUSES, file_rows, file_source_specs
from pipelines.spec.expectations import GX_KINDS
from pipelines.spec.registry import Registry
from pipelines.spec.tables import TableSpec
from quality.gx_runner import CHECK_NAMES, import_gx, validate_table
from quality.reconcile import CHECK_NAME, Pipeline, pipelines_of, reconcile_pipeline, reconcile_totals
from quality.reconcile import totals_expectations as _totals
from quality.report import write_report
from quality.results import CheckResult, save_result
from quality.run import validate_registry

_SEVERITY = {"error": AssetCheckSeverity.ERROR, "warn": AssetCheckSeverity.WARN}


def _slug(text: str) -> str:
    out = "".join(c if c.isalnum() else "_" for c in text.lower())
    while "__" in out:
        out = out.replace("__", "_")
    return out.strip("_")[:60]


def check_metadata(result: CheckResult) -> dict[str, MetadataValue]:
    """What a person needs to act on a check result: counts, percentages, samples, versions, where to read more."""
    failed = result.failed
    values: dict[str, object] = {
        "expectations_evaluated": len(result.outcomes),
        "expectations_failed": len(failed),
        "failed": "; ".join(o.name for o in failed) or "none",
        "engine": result.engine,
        "seconds": float(result.seconds),
        "results": MetadataValue.md("\n".join(f"- {o.summary()}" for o in result.outcomes)),
    }
    if result.engine.startswith("great_expectations"):
        values["gx_version"] = result.engine.split()[-1]
    if result.rows_checked is not None:
        values["rows_checked"] = int(result.rows_checked)
    if result.snapshot_id is not None:
        values["snapshot_id"] = result.snapshot_id
    slugs: set[str] = set()
    for index, o in enumerate(result.outcomes):
        slug = _slug(o.name)
        slug = slug if slug not in slugs else f"{slug}_{index}"  # e.g. "amount >= 0" and "amount <= 0"
        slugs.add(slug)
        if o.unexpected_count is not None:
            values[f"unexpected_count_{slug}"] = int(o.unexpected_count)
        if o.unexpected_percent is not None:
            values[f"unexpected_percent_{slug}"] = float(o.unexpected_percent)
    samples = {o.name: o.samples for o in failed if o.samples}
    if samples:
        values["samples"] = MetadataValue.json(samples)
    if result.carried_over_at is not None:  # nothing it reads changed: the result of the run that checked it
        values["carried_over_from"] = result.checked_at
    if result.notes:
        values["notes"] = "\n".join(result.notes)
    return as_metadata(values)


def _record(context: AssetCheckExecutionContext, spark: SparkResource, result: CheckResult) -> AssetCheckResult:
    """Persist the result, refresh the report, and turn the result into a Dagster check result."""
    settings = spark.settings()
    save_result(settings, result)
    report = write_report(settings)
    for outcome in result.failed:
        context.log.warning(f"{result.table} {result.check}: {outcome.summary()}")
    meta = check_metadata(result)
    meta["report"] = MetadataValue.path(str(report))
    failed = ", ".join(o.name for o in result.failed)
    return AssetCheckResult(
        check_name=result.check,
        asset_key=asset_key(result.table),
        passed=result.passed,
        severity=_SEVERITY[result.severity],
        metadata=meta,
        description=f"failed: {failed}" if failed else f"{len(result.outcomes)} expectations passed",
    )


def build_expectation_checks(spec: TableSpec) -> AssetChecksDefinition | None:
    """One GX validation per run of the table, reported as a blocking and a non-blocking check."""
    severities = {e.severity for e in spec.expectations if e.kind in GX_KINDS}
    if not severities:
        return None
    while_jvm_starts(import_gx)  # a run that starts Spark imports GX on the other core meanwhile
    key = asset_key(spec.name)
    specs = [
        AssetCheckSpec(
            CHECK_NAMES[severity],
            asset=key,
            blocking=severity == "error",
            description=(
                "Great Expectations suite, error expectations: a failure blocks downstream assets."
                if severity == "error"
                else "Great Expectations suite, warn expectations: failures are recorded, the run goes on."
            ),
        )
        for severity in ("error", "warn")
        if severity in severities
    ]

    @multi_asset_check(specs=specs, name=f"{spec.name.replace('.', '__')}__expectations")
    def _check(context: AssetCheckExecutionContext, spark: SparkResource) -> Iterator[AssetCheckResult]:
        for result in validate_table(spark.session, spark.settings(), spec).values():
            yield _record(context, spark, result)

    return _check


def build_pipeline_reconciliation(pipeline: Pipeline) -> AssetChecksDefinition:
    """landed = bronze = silver + quarantine + duplicates; blocking, so gold never builds on lost or doubled rows."""

    @asset_check(
        asset=asset_key(pipeline.silver.name),
        name=CHECK_NAME,
        blocking=True,
        additional_deps=[asset_key(pipeline.bronze.name)],
        description=(
            f"Every landed line is in exactly one of {pipeline.silver.name}, {pipeline.sink.quarantine_table} "
            f"or the duplicates, and bronze holds every landed line."
        ),
    )
    def _reconcile(context: AssetCheckExecutionContext, spark: SparkResource) -> AssetCheckResult:
        return _record(context, spark, reconcile_pipeline(spark.session, spark.settings(), pipeline))

    return _reconcile


def build_totals_reconciliation(spec: TableSpec) -> AssetChecksDefinition:
    """The table's totals per key equal its upstream's, as of the snapshot its stream has read."""
    expectations = _totals(spec)
    upstreams = sorted({e.upstream for e in expectations if e.upstream})

    @asset_check(
        asset=asset_key(spec.name),
        name=CHECK_NAME,
        blocking=any(e.severity == "error" for e in expectations),
        additional_deps=[asset_key(u) for u in upstreams],
        description=f"Totals per key equal the totals of {', '.join(upstreams)}.",
    )
    def _reconcile(context: AssetCheckExecutionContext, spark: SparkResource) -> AssetCheckResult:
        return _record(context, spark, reconcile_totals(spark.session, spark.settings(), spec))

    return _reconcile


LANDED_FILES = "landed_files"
LANDED_FILES_WARN = "landed_files_warn"
# Files named per check result; the counts always cover all of them.
_MAX_NAMED = 50


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def landed_files_results(session: Session, settings: Settings, spec: TableSpec) -> list[AssetCheckResult]:
    """The `landed_files` (error) and `landed_files_warn` (warn) results of one file-source table, now."""
    records = file_rows(session, settings, spec, problems_only=True)
    key = asset_key(spec.name)
    pending = [r for r in records if r.unresolved]
    acknowledged = [r for r in records if r.acknowledgement is not None]
    rejected_meta = as_metadata(
        {"unresolved_files": len(pending), "acknowledged_files": len(acknowledged), "files_table": spec.files_table}
    )
    if pending:
        rows = [
            f"| {_md_cell(r.name)} | {_md_cell(r.reason or '-')} | `{r.ack_command()}` |" for r in pending[:_MAX_NAMED]
        ]
        rejected_meta["files"] = MetadataValue.md(
            "| file | why it was rejected | after landing a fixed copy under a new name |\n| --- | --- | --- |\n"
            + "\n".join(rows)
        )
        rejected_meta["ack_commands"] = MetadataValue.text("\n".join(r.ack_command() for r in pending))
        description = (
            f"{len(pending)} rejected landing file(s) not acknowledged: "
            + "; ".join(f"{r.name}: {r.reason}" for r in pending[:5])
            + f"; land a fixed copy under a new name, then run '{pending[0].ack_command()}'"
            + (" (and the other commands in ack_commands)" if len(pending) > 1 else "")
        )
    else:
        description = f"no unresolved rejected landing files ({len(acknowledged)} acknowledged)"
    warned = [r for r in records if r.status in WARNING_STATUSES]
    warn_meta = as_metadata(
        {f"files_{status}": sum(1 for r in warned if r.status == status) for status in WARNING_STATUSES}
    )
    if warned:
        newest = sorted(warned, key=lambda r: (r.recorded_at is not None, r.recorded_at), reverse=True)[:_MAX_NAMED]
        warn_meta["files"] = MetadataValue.md("\n".join(f"- {r.name}: {r.status.replace('_', '-')}" for r in newest))
        what = ", ".join(f"{r.name} ({r.status.replace('_', '-')})" for r in newest[:5])
        warn_description = f"{len(warned)} landed file(s) held no rows: {what} (nothing was loaded from them)"
    else:
        warn_description = "no empty or header-only landed files"
    return [
        AssetCheckResult(
            check_name=LANDED_FILES,
            asset_key=key,
            passed=not pending,
            severity=AssetCheckSeverity.ERROR,
            metadata=rejected_meta,
            description=description,
        ),
        AssetCheckResult(
            check_name=LANDED_FILES_WARN,
            asset_key=key,
            passed=not warned,
            severity=AssetCheckSeverity.WARN,
            metadata=warn_meta,
            description=warn_description,
        ),
    ]


def build_landed_files_checks(spec: TableSpec) -> AssetChecksDefinition:
    """`landed_files` (blocking) and `landed_files_warn` on a file-source table, from one read of `<table>_files`."""
    key = asset_key(spec.name)
    specs = [
        AssetCheckSpec(
            LANDED_FILES,
            asset=key,
            blocking=True,
            description=(
                f"Every landed file {spec.name} rejected is acknowledged ('tributary files ack {spec.name} FILE'); "
                "an unresolved rejection blocks downstream assets."
            ),
        ),
        AssetCheckSpec(
            LANDED_FILES_WARN,
            asset=key,
            blocking=False,
            description=f"Names the empty and header-only files landed for {spec.name} (recorded, the run goes on).",
        ),
    ]

    @multi_asset_check(specs=specs, name=f"{spec.name.replace('.', '__')}__landed_files")
    def _check(context: AssetCheckExecutionContext, spark: SparkResource) -> Iterator[AssetCheckResult]:
        for result in landed_files_results(spark.session, spark.settings(), spec):
            if not result.passed:
                context.log.warning(f"{spec.name} {result.check_name}: {result.description}")
            yield result

    return _check


def build_asset_checks(registry: Registry) -> list:
    """Every asset check the registry declares: expectation suites, reconciliations and landed files."""
    validate_registry(registry)
    checks: list = [c for c in (build_expectation_checks(spec) for spec in registry) if c is not None]
    checks += [build_pipeline_reconciliation(p) for p in pipelines_of(registry)]
    validating = {p.silver.name for p in pipelines_of(registry)}
    checks += [build_totals_reconciliation(s) for s in registry if _totals(s) and s.name not in validating]
    checks += [build_landed_files_checks(s) for s in file_source_specs(registry)]
    return checks
