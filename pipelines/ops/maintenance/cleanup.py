"""Deleting what a table no longer needs: expired snapshots and the files only they held, and orphan files.

Snapshot expiry never removes a snapshot a downstream consumer's checkpoint restarts from, or any later one (read
from the checkpoints, see `pipelines.io.checkpoints`). Orphan files are only removed when older than the policy's
retention, never younger than 24 hours, because the files of a commit still in flight look exactly like orphans.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pyspark.sql import SparkSession

from infra.errors import ConfigError, PipelineError
from infra.settings import Settings
from pipelines.io.checkpoints import ConsumerPosition, consumer_positions
from pipelines.io.formats import table_format
from pipelines.ops.maintenance.policies import policy_for
from pipelines.ops.maintenance.procedures import (
    EXPIRE_SNAPSHOTS,
    REMOVE_ORPHAN_FILES,
    call_procedure,
    int_columns,
    procedure_sql,
)
from pipelines.spec.registry import Registry
from pipelines.spec.tables import MaintenancePolicy

ORPHAN_MINIMUM_AGE = timedelta(hours=24)


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


def _timestamp(moment: datetime) -> str:
    """A Spark timestamp literal in UTC (independent of the session time zone)."""
    if moment.tzinfo is None:
        raise ConfigError(f"maintenance times must be timezone-aware, got {moment!r}")
    return f"TIMESTAMP '{moment.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S.%f')}Z'"


def _from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms // 1000, tz=UTC) + timedelta(milliseconds=ms % 1000)


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
    result, _ = expire_with_protection(
        spark, settings, registry, name, policy, now, older_than, retain_last, snapshot_ids
    )
    return result


def expire_with_protection(
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
    """`expire_snapshots`, also returning the stream protection it applied (its notes go in the report)."""
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
    rows, attempts = call_procedure(
        spark, name, EXPIRE_SNAPSHOTS, procedure_sql(settings, name, EXPIRE_SNAPSHOTS, args)
    )
    after = spark.sql(count_sql).collect()[0].n
    result = {
        **int_columns(rows[0]),
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
    sql = procedure_sql(settings, name, REMOVE_ORPHAN_FILES, {"older_than": _timestamp(cutoff)})
    rows, attempts = call_procedure(spark, name, REMOVE_ORPHAN_FILES, sql)
    return {"orphan_files_removed": len(rows), "attempts": attempts}
