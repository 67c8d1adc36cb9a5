"""Table maintenance in Spark: compaction, manifest rewrite, snapshot expiry and orphan-file removal.

Every micro-batch commits a few small files and a snapshot; left alone, a table slows down (many small files,
many manifests) and its metadata and disk use grow forever. `run_maintenance` applies a table's
`MaintenancePolicy` with Iceberg's procedures (`CALL <catalog>.system.<procedure>(table => 'ns.t', ...)`) and
reports the table's shape before and after.

Safe for running streams:
- compaction and manifest rewrites commit `replace` snapshots, which Iceberg stream readers skip, and never
  change rows; a commit that conflicts with a concurrent one is retried (see `_call`);
- snapshot expiry never removes a snapshot a downstream consumer's checkpoint restarts from, or any later one
  (read from the checkpoints, see `pipelines.io.checkpoints`): a time-based expiry is held back to the oldest
  needed snapshot; explicitly naming a needed snapshot is refused;
- orphan files are only removed when older than the policy's retention, never younger than 24 hours, because
  the files of a commit still in flight look exactly like orphans.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import unquote, urlparse

from pyspark.sql import Row, SparkSession

from infra.errors import ConfigError, PipelineError
from infra.identifiers import validate_table_name
from infra.settings import Settings
from pipelines.io.checkpoints import ConsumerPosition, consumer_positions
from pipelines.io.formats import table_format
from pipelines.spec.registry import Registry
from pipelines.spec.tables import MaintenancePolicy

MB = 1024 * 1024
ORPHAN_MINIMUM_AGE = timedelta(hours=24)

REWRITE_DATA_FILES = "rewrite_data_files"
REWRITE_MANIFESTS = "rewrite_manifests"
EXPIRE_SNAPSHOTS = "expire_snapshots"
REMOVE_ORPHAN_FILES = "remove_orphan_files"
OPERATIONS = (REWRITE_DATA_FILES, REWRITE_MANIFESTS, EXPIRE_SNAPSHOTS, REMOVE_ORPHAN_FILES)
COMPACTION_OPERATIONS = (REWRITE_DATA_FILES, REWRITE_MANIFESTS)

# A commit that lost a race against a concurrent commit (after Iceberg's own commit retries) is re-planned from
# the new table state and tried again this many times in all, waiting a little longer each time.
COMMIT_ATTEMPTS = 3
_RETRY_WAIT_SECONDS = 1.0
_CONFLICT_MARKERS = ("CommitFailedException", "ValidationException", "SQLITE_BUSY")


@dataclass(frozen=True)
class TableShape:
    """What a table looks like on disk and in its metadata (the numbers maintenance changes)."""

    data_files: int
    data_bytes: int
    avg_file_bytes: int
    manifests: int
    snapshots: int
    rows: int
    bytes_on_disk: int | None


@dataclass(frozen=True)
class StreamProtection:
    """Snapshots of a table that downstream consumers still need to restart from."""

    positions: tuple[ConsumerPosition, ...]
    needed: dict[int, int]  # snapshot id -> commit time (epoch ms)
    notes: tuple[str, ...] = ()

    @property
    def since_ms(self) -> int | None:
        """Commit time of the oldest needed snapshot (None when nothing is needed)."""
        return min(self.needed.values()) if self.needed else None


@dataclass
class MaintenanceReport:
    """What one maintenance run did to one table."""

    table: str
    operations: tuple[str, ...]
    before: TableShape | None = None
    after: TableShape | None = None
    seconds: float = 0.0
    steps: dict[str, dict[str, int]] = field(default_factory=dict)
    step_seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None

    def numbers(self) -> dict[str, int | float]:
        """Flat numbers for Dagster metadata: `<shape>_before`, `<shape>_after`, `<operation>_<result>`."""
        out: dict[str, int | float] = {"seconds": self.seconds}
        for suffix, shape in (("before", self.before), ("after", self.after)):
            if shape is None:
                continue
            for key, value in vars(shape).items():
                if value is not None:
                    out[f"{key}_{suffix}"] = value
        for op, result in self.steps.items():
            for key, value in result.items():
                out[f"{op}_{key}"] = value
        for op, seconds in self.step_seconds.items():
            out[f"{op}_seconds"] = seconds
        return out


def maintained_tables(registry: Registry) -> list[tuple[str, MaintenancePolicy]]:
    """Every table the registry writes (extra outputs such as quarantine tables too) with its policy."""
    return [(out.name, spec.maintenance) for spec in registry for out in spec.outputs()]


def policy_for(registry: Registry, table: str) -> MaintenancePolicy:
    """The maintenance policy of `table` (the policy of the spec that writes it), validated."""
    validate_table_name(table)
    for name, policy in maintained_tables(registry):
        if name == table:
            policy.validate(table)
            return policy
    known = ", ".join(name for name, _ in maintained_tables(registry))
    raise ConfigError(f"no table {table!r} in the registry; known tables: {known}")


def _procedure(settings: Settings, name: str, procedure: str, args: dict[str, str]) -> str:
    ns, table = validate_table_name(name)
    parts = [f"table => '{ns}.{table}'", *(f"{key} => {value}" for key, value in args.items())]
    return f"CALL {settings.catalog_name}.system.{procedure}({', '.join(parts)})"


def _timestamp(moment: datetime) -> str:
    """A Spark timestamp literal in UTC (independent of the session time zone)."""
    if moment.tzinfo is None:
        raise ConfigError(f"maintenance times must be timezone-aware, got {moment!r}")
    return f"TIMESTAMP '{moment.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S.%f')}Z'"


def _from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms // 1000, tz=UTC) + timedelta(milliseconds=ms % 1000)


def _call(spark: SparkSession, name: str, procedure: str, sql: str) -> tuple[list[Row], int]:
    """Run one procedure; on a commit conflict re-run it (it re-plans from the new snapshot). Returns rows, attempts."""
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        try:
            return spark.sql(sql).collect(), attempt
        except Exception as exc:
            text = str(exc)
            first = _reason(text) or type(exc).__name__
            if not any(marker in text for marker in _CONFLICT_MARKERS):
                raise PipelineError(f"table {name}: {procedure} failed: {first}") from exc
            if attempt == COMMIT_ATTEMPTS:
                raise PipelineError(
                    f"table {name}: {procedure} conflicted with concurrent commits {attempt} times ({first}); "
                    "the failed attempts changed nothing (an Iceberg commit is atomic): run maintenance again, "
                    "ideally between ingestion runs"
                ) from exc
            time.sleep(_RETRY_WAIT_SECONDS * attempt)
    raise AssertionError("unreachable")


def _reason(text: str) -> str:
    """The most telling line of a (Java) error: the first naming an exception, else the first line."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("at ")]
    for line in lines:
        if "Exception:" in line or "Error:" in line:
            return line[:400]
    return lines[0][:400] if lines else ""


def _ints(row: Row) -> dict[str, int]:
    return {key: int(value) for key, value in row.asDict().items() if isinstance(value, int | float)}


def rewrite_data_files(spark: SparkSession, settings: Settings, name: str, policy: MaintenancePolicy) -> dict[str, int]:
    """Compact small files: bin-pack (or sort, if the policy has a sort order) toward the target file size."""
    policy.validate(name)
    options = {
        "min-input-files": str(policy.min_input_files),
        "target-file-size-bytes": str(policy.target_file_size_mb * MB),
    }
    args = {"options": "map(" + ", ".join(f"'{k}', '{v}'" for k, v in options.items()) + ")"}
    if policy.sort_order:
        args = {"strategy": "'sort'", "sort_order": f"'{', '.join(policy.sort_order)}'", **args}
    else:
        args = {"strategy": "'binpack'", **args}
    rows, attempts = _call(spark, name, REWRITE_DATA_FILES, _procedure(settings, name, REWRITE_DATA_FILES, args))
    return {**_ints(rows[0]), "attempts": attempts}


def rewrite_manifests(spark: SparkSession, settings: Settings, name: str) -> dict[str, int]:
    """Rewrite manifests so they are few and clustered by partition (faster planning)."""
    rows, attempts = _call(spark, name, REWRITE_MANIFESTS, _procedure(settings, name, REWRITE_MANIFESTS, {}))
    return {**_ints(rows[0]), "attempts": attempts}


def _snapshot_chain(spark: SparkSession, settings: Settings, name: str) -> tuple[list[int], dict[int, int]]:
    """The current snapshot's ancestry (newest first) and every snapshot's commit time in epoch ms."""
    qualified = table_format(settings).qualified(name)
    snaps = spark.sql(
        f"SELECT snapshot_id, parent_id, unix_millis(committed_at) AS ms FROM {qualified}.snapshots"
    ).collect()
    parents = {r.snapshot_id: r.parent_id for r in snaps}
    committed = {r.snapshot_id: int(r.ms) for r in snaps}
    main = spark.sql(f"SELECT snapshot_id FROM {qualified}.refs WHERE name = 'main'").collect()
    chain: list[int] = []
    current = main[0].snapshot_id if main else None
    while current is not None and current in parents:
        chain.append(current)
        current = parents[current]
    return chain, committed


def stream_protection(spark: SparkSession, settings: Settings, registry: Registry, name: str) -> StreamProtection:
    """The snapshots of `name` that the registry's downstream consumers still need, read from their checkpoints.

    A consumer restarting from snapshot S walks forward through every descendant of S, so S and all newer
    ancestors of the current snapshot are needed; a consumer that has not read anything yet needs them all.
    """
    positions = tuple(consumer_positions(settings, registry, name))
    if not positions:
        return StreamProtection(positions, {})
    chain, committed = _snapshot_chain(spark, settings, name)
    needed: dict[int, int] = {}
    notes = []
    for pos in positions:
        if not chain:
            break
        # Only this table's ids count: a multi-source consumer's offsets name other tables' snapshots too.
        hits = [chain.index(i) for i in pos.candidates if i in chain]
        if pos.snapshot_id is None:
            start = len(chain) - 1
        elif hits:
            start = max(hits)
        else:
            notes.append(
                f"{pos.describe()}, but that snapshot is no longer in {name}'s history: the consumer cannot "
                "resume; reset its checkpoint and rebuild it"
            )
            continue
        needed.update({s: committed[s] for s in chain[: start + 1]})
    return StreamProtection(positions, needed, tuple(notes))


def expire_snapshots(
    spark: SparkSession,
    settings: Settings,
    registry: Registry,
    name: str,
    policy: MaintenancePolicy | None = None,
    *,
    now: datetime | None = None,
    older_than: datetime | None = None,
    retain_last: int | None = None,
    snapshot_ids: Iterable[int] = (),
) -> dict[str, int]:
    """Expire old snapshots and delete the files only they referenced, without breaking downstream streams.

    Snapshots older than the policy's retention (or `older_than`) are expired, except the last
    `min_snapshots_to_keep` (or `retain_last`) and every snapshot a downstream consumer still needs: the
    cut-off is held back to the oldest of those. Naming a needed snapshot in `snapshot_ids` is refused.
    """
    result, _ = _expire(spark, settings, registry, name, policy, now, older_than, retain_last, snapshot_ids)
    return result


def _expire(
    spark: SparkSession,
    settings: Settings,
    registry: Registry,
    name: str,
    policy: MaintenancePolicy | None,
    now: datetime | None,
    older_than: datetime | None,
    retain_last: int | None,
    snapshot_ids: Iterable[int],
) -> tuple[dict[str, int], StreamProtection]:
    policy = policy or policy_for(registry, name)
    policy.validate(name)
    now = now or datetime.now(UTC)
    cutoff = older_than or now - timedelta(days=policy.snapshot_retention_days)
    keep = policy.min_snapshots_to_keep if retain_last is None else retain_last
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ConfigError(f"table {name!r}: retain_last={keep!r} must be an integer >= 1")
    explicit = sorted({int(s) for s in snapshot_ids})
    protection = stream_protection(spark, settings, registry, name)
    unsafe = [s for s in explicit if s in protection.needed]
    if unsafe:
        reasons = "; ".join(p.describe() for p in protection.positions)
        raise PipelineError(
            f"table {name}: refusing to expire snapshot(s) {unsafe}: a downstream stream still needs them to "
            f"restart ({reasons}); run the consumer(s) first so their checkpoints move past these snapshots"
        )
    since = protection.since_ms
    # Iceberg expires snapshots committed strictly before the cut-off: holding it at the oldest needed
    # snapshot's commit time keeps that snapshot and everything newer.
    effective = min(cutoff, _from_ms(since)) if since is not None else cutoff
    held_back = sum(1 for ms in protection.needed.values() if _from_ms(ms) < cutoff)
    args = {"older_than": _timestamp(effective), "retain_last": str(keep)}
    if explicit:
        args["snapshot_ids"] = f"array({', '.join(str(s) for s in explicit)})"
    qualified = table_format(settings).qualified(name)
    count_sql = f"SELECT count(*) AS n FROM {qualified}.snapshots"
    before = spark.sql(count_sql).collect()[0].n
    rows, attempts = _call(spark, name, EXPIRE_SNAPSHOTS, _procedure(settings, name, EXPIRE_SNAPSHOTS, args))
    after = spark.sql(count_sql).collect()[0].n
    result = {
        **_ints(rows[0]),
        "snapshots_expired": int(before - after),
        "snapshots_held_for_streams": held_back,
        "attempts": attempts,
    }
    return result, protection


def remove_orphan_files(
    spark: SparkSession,
    settings: Settings,
    name: str,
    policy: MaintenancePolicy,
    *,
    now: datetime | None = None,
    older_than: datetime | None = None,
) -> dict[str, int]:
    """Delete files in the table's folder that no snapshot or metadata references and that are old enough.

    `older_than` overrides the policy's retention but may never be less than 24 hours before `now`.
    """
    policy.validate(name)
    now = now or datetime.now(UTC)
    cutoff = older_than or now - timedelta(days=policy.orphan_retention_days)
    if now - cutoff < ORPHAN_MINIMUM_AGE:
        raise ConfigError(
            f"table {name!r}: orphan files may only be removed when older than 24 hours (asked for files older than "
            f"{cutoff.isoformat()}); younger files may belong to a commit still in flight"
        )
    sql = _procedure(settings, name, REMOVE_ORPHAN_FILES, {"older_than": _timestamp(cutoff)})
    rows, attempts = _call(spark, name, REMOVE_ORPHAN_FILES, sql)
    return {"orphan_files_removed": len(rows), "attempts": attempts}


def table_location(spark: SparkSession, settings: Settings, name: str) -> str:
    """The table's root location URI."""
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {table_format(settings).qualified(name)}").collect()
    for row in rows:
        if row.col_name == "Location":
            return row.data_type
    raise PipelineError(f"table {name}: DESCRIBE TABLE EXTENDED reports no location")


def bytes_on_disk(location: str) -> int | None:
    """Bytes of every file under a local table location (None for remote storage)."""
    parsed = urlparse(location)
    if parsed.scheme not in ("", "file"):
        return None
    total = 0
    for folder, _, files in os.walk(Path(unquote(parsed.path))):
        for file in files:
            try:
                total += os.stat(os.path.join(folder, file)).st_size
            except FileNotFoundError:  # deleted by a concurrent commit or expiry while walking
                continue
    return total


def table_shape(spark: SparkSession, settings: Settings, name: str, location: str | None = None) -> TableShape:
    """Data files, sizes, manifests, snapshots and rows from Iceberg metadata tables (no data scan)."""
    qualified = table_format(settings).qualified(name)
    files = spark.sql(
        f"SELECT count(*) AS n, coalesce(sum(record_count), 0) AS r, coalesce(sum(file_size_in_bytes), 0) AS b "
        f"FROM {qualified}.data_files"
    ).collect()[0]
    manifests = spark.sql(f"SELECT count(*) AS n FROM {qualified}.manifests").collect()[0].n
    snapshots = spark.sql(f"SELECT count(*) AS n FROM {qualified}.snapshots").collect()[0].n
    n, data_bytes = int(files.n), int(files.b)
    return TableShape(
        data_files=n,
        data_bytes=data_bytes,
        avg_file_bytes=data_bytes // n if n else 0,
        manifests=int(manifests),
        snapshots=int(snapshots),
        rows=int(files.r),
        bytes_on_disk=bytes_on_disk(location or table_location(spark, settings, name)),
    )


def run_maintenance(
    spark: SparkSession,
    settings: Settings,
    registry: Registry,
    name: str,
    operations: Sequence[str] = OPERATIONS,
    *,
    now: datetime | None = None,
    expire_older_than: datetime | None = None,
    retain_last: int | None = None,
    orphan_older_than: datetime | None = None,
) -> MaintenanceReport:
    """Apply `name`'s maintenance policy: the chosen operations in the order compact, manifests, expire, orphans.

    The overrides (`expire_older_than`, `retain_last`, `orphan_older_than`) replace the policy's retention for
    this run; stream protection and the 24-hour orphan minimum still apply.
    """
    unknown = [op for op in operations if op not in OPERATIONS]
    if unknown:
        raise ConfigError(f"unknown maintenance operation(s) {unknown}; choose from {OPERATIONS}")
    policy = policy_for(registry, name)
    now = now or datetime.now(UTC)
    chosen = tuple(op for op in OPERATIONS if op in operations)
    report = MaintenanceReport(table=name, operations=chosen)
    started = time.perf_counter()
    if not spark.catalog.tableExists(table_format(settings).qualified(name)):
        report.skipped = f"table {name} does not exist yet: nothing to maintain"
        return report
    location = table_location(spark, settings, name)
    report.before = table_shape(spark, settings, name, location)
    for op in chosen:
        disk = bytes_on_disk(location)
        t0 = time.perf_counter()
        if op == REWRITE_DATA_FILES:
            result = rewrite_data_files(spark, settings, name, policy)
        elif op == REWRITE_MANIFESTS:
            result = rewrite_manifests(spark, settings, name)
        elif op == EXPIRE_SNAPSHOTS:
            result, protection = _expire(
                spark, settings, registry, name, policy, now, expire_older_than, retain_last, ()
            )
            report.notes.extend(protection.notes)
        else:
            result = remove_orphan_files(spark, settings, name, policy, now=now, older_than=orphan_older_than)
        report.step_seconds[op] = round(time.perf_counter() - t0, 3)
        after_disk = bytes_on_disk(location)
        if disk is not None and after_disk is not None and op in (EXPIRE_SNAPSHOTS, REMOVE_ORPHAN_FILES):
            result["bytes_freed"] = max(disk - after_disk, 0)
        report.steps[op] = result
    report.after = table_shape(spark, settings, name, location)
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def delta_maintenance_sql(table: str, policy: MaintenancePolicy, catalog: str = "spark_catalog") -> list[str]:
    """The Delta Lake statements that carry out `policy` (Delta's jars are not available here, so this only plans).

    OPTIMIZE compacts small files (ZORDER BY the sort-order columns, if any; Delta has no sort direction there).
    VACUUM deletes both files of expired versions and untracked (orphan) files, with one threshold: the longer of
    the two retentions. Delta keeps versions by time only, so `min_snapshots_to_keep` has no equivalent, and
    manifests have none either (Delta checkpoints its log by itself).
    """
    ns, name = validate_table_name(table)
    policy.validate(table)
    if not catalog.isidentifier():
        raise ConfigError(f"catalog name {catalog!r} is not an identifier")
    qualified = f"{catalog}.{ns}.{name}"
    keep_days = max(policy.snapshot_retention_days, policy.orphan_retention_days)
    optimize = f"OPTIMIZE {qualified}"
    if policy.sort_order:
        optimize += f" ZORDER BY ({', '.join(item.split()[0] for item in policy.sort_order)})"
    return [
        f"ALTER TABLE {qualified} SET TBLPROPERTIES ("
        f"'delta.logRetentionDuration' = 'interval {policy.snapshot_retention_days} days', "
        f"'delta.deletedFileRetentionDuration' = 'interval {keep_days} days')",
        optimize,
        f"VACUUM {qualified} RETAIN {keep_days * 24} HOURS",
    ]
