"""Where Delta tables live, and their metadata as the SQL commands see it (versions as snapshots).

A Delta table `namespace.table` is the folder `<warehouse>/delta/<namespace>/<table>` holding a `_delta_log`; the
folders are the catalog (no database entry is needed, and any Delta reader can open a table by its folder).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from infra.errors import ConfigError, PipelineError
from infra.identifiers import validate_table_name
from infra.settings import Settings
from infra.sql.table_metadata import Snapshot, TableMetadata


def delta_location(settings: Settings, name: str) -> Path:
    """The folder of the Delta table `name`."""
    ns, table = validate_table_name(name)
    return settings.delta_warehouse / ns / table


def delta_tables(settings: Settings) -> dict[str, Path]:
    """`namespace.table` -> folder, for every Delta table under the warehouse."""
    root = settings.delta_warehouse
    found = {}
    for log in sorted(root.glob("*/*/_delta_log")):
        name = f"{log.parent.parent.name}.{log.parent.name}"
        try:
            validate_table_name(name)
        except ConfigError:
            continue
        if any(log.glob("*.json")):
            found[name] = log.parent
    return found


@dataclass(frozen=True)
class Commit:
    """What one Delta version did."""

    version: int
    timestamp_ms: int
    operation: str  # append | overwrite | delete | replace (compaction) | create | other
    added: tuple[dict, ...] = ()  # `add` actions with dataChange=true
    info: dict = field(default_factory=dict)  # commitInfo
    removes: bool = False  # any `remove` action, with or without a data change
    metadata: bool = False  # a `metaData` action (the table's schema or properties set)

    @property
    def added_records(self) -> int:
        """Rows in the files this version added with a data change (from their stats)."""
        return sum(json.loads(a.get("stats") or "{}").get("numRecords", 0) for a in self.added)

    @property
    def appended(self) -> tuple[dict, ...]:
        """The files a stream reads from this version: its adds when it only appended, else none."""
        return self.added if self.operation == "append" else ()


def commit_file(table: Path, version: int) -> Path:
    """The JSON commit file of `version`."""
    return table / "_delta_log" / f"{version:020d}.json"


def read_commit(table: Path, version: int) -> Commit:
    """Parse one commit of the table at `table`; fail naming the file when it is gone (log clean-up)."""
    path = commit_file(table, version)
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise PipelineError(
            f"Delta table {table}: commit file {path.name} is gone (log clean-up removed it before Tributary "
            "recorded it for downstream streams); run a full refresh of the tables that read this one"
        ) from None
    actions = [json.loads(line) for line in lines if line.strip()]
    info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
    info = {**_user_metadata(info), **info}
    adds = [a["add"] for a in actions if "add" in a]
    removes = [a["remove"] for a in actions if "remove" in a]
    changed_adds = tuple(a for a in adds if a.get("dataChange", True))
    changed_removes = [r for r in removes if r.get("dataChange", True)]
    metadata = any("metaData" in a for a in actions)
    if metadata and not adds and not removes:
        operation = "create" if version == 0 else "other"
    elif changed_adds and not changed_removes:
        operation = "append"
    elif changed_removes:
        operation = "overwrite" if changed_adds else "delete"
    elif adds or removes:
        operation = "replace"
    else:
        operation = "append" if any("txn" in a for a in actions) else "other"
    return Commit(version, int(info.get("timestamp", 0)), operation, changed_adds, info, bool(removes), metadata)


def _user_metadata(info: dict) -> dict:
    """Tributary's keys in a commit delta-spark wrote: it takes commit info only as the `userMetadata` text, which
    Tributary writes as a JSON object (delta-rs commits carry the keys themselves)."""
    try:
        value = json.loads(info.get("userMetadata") or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def data_path(table: Path, add: dict) -> Path:
    """The local file of an `add` action (Delta paths are relative and URI-encoded)."""
    return table / unquote(add["path"])


def delta_metadata(name: str, folder: Path) -> TableMetadata:
    """The table's versions as snapshots (id = version), its current schema and its row count, from delta-rs."""
    import pyarrow as pa
    from deltalake import DeltaTable

    table = DeltaTable(str(folder))
    snapshots = {}
    for log in sorted((folder / "_delta_log").glob("*.json")):  # older commits may be cleaned up after a checkpoint
        if not log.stem.isdigit():
            continue
        commit = read_commit(folder, int(log.stem))
        metrics = commit.info.get("operationMetrics") or {}
        summary = {"operation": commit.operation, "added-records": str(commit.added_records)}
        if "num_target_rows_deleted" in metrics:
            summary["deleted-records"] = str(metrics["num_target_rows_deleted"])
        parent = commit.version - 1 if commit.version else None
        snapshots[commit.version] = Snapshot(commit.version, parent, commit.timestamp_ms, 0, summary)
    current = table.version()
    adds = pa.table(table.get_add_actions(flatten=True))
    rows = sum(v or 0 for v in adds.column("num_records").to_pylist()) if adds.num_rows else 0
    if current in snapshots:
        latest = snapshots[current]
        summary = {**latest.summary, "total-records": str(rows)}
        snapshots[current] = Snapshot(current, latest.parent_id, latest.timestamp_ms, 0, summary)
    fields = [
        {"name": f["name"], "type": _type_text(f["type"]), "required": not f.get("nullable", True)}
        for f in json.loads(table.schema().to_json())["fields"]
    ]
    return TableMetadata(
        name=name,
        location=str(folder),
        uuid=str(table.metadata().id),
        current_snapshot_id=current,
        current_schema_id=0,
        schemas={0: fields},
        snapshots=snapshots,
        log=tuple(sorted((s.timestamp_ms, s.snapshot_id) for s in snapshots.values())),
        format="delta",
    )


def _type_text(node: object) -> str:
    """A Delta schema type as text: primitives as named, nested types spelled out."""
    if isinstance(node, str):
        return node
    if not isinstance(node, dict):
        return str(node)
    kind = node.get("type")
    if kind == "array":
        return f"array<{_type_text(node.get('elementType'))}>"
    if kind == "map":
        return f"map<{_type_text(node.get('keyType'))}, {_type_text(node.get('valueType'))}>"
    if kind == "struct":
        return "struct<" + ", ".join(f"{f['name']}: {_type_text(f['type'])}" for f in node.get("fields", [])) + ">"
    return str(kind)


def _commits_between(table: Path, since: int | None, until: int) -> list[Commit] | None:
    """The commits after `since` (None: from version 0) up to `until`, when none of them removed rows (an
    overwrite, a delete, a MERGE) and every one is still in the log; else None."""
    commits = []
    for version in range(0 if since is None else since + 1, until + 1):
        if not commit_file(table, version).is_file():  # cleaned up after a checkpoint: the versions are unknown
            return None
        commit = read_commit(table, version)
        if commit.operation in ("overwrite", "delete"):
            return None
        commits.append(commit)
    return commits


def appended_between(table: Path, since: int | None, until: int) -> list[dict] | None:
    """The `add` actions of the versions after `since` (None: from version 0) up to `until`, when each of them
    appended rows, rewrote files without a data change (OPTIMIZE) or changed no files; None when one removed
    rows (an overwrite, a delete, a MERGE)."""
    commits = _commits_between(table, since, until)
    return None if commits is None else [add for commit in commits for add in commit.appended]


def appended_infos(table: Path, since: int | None, until: int) -> list[dict[str, str]] | None:
    """The commit info (and `added-records`) of each version after `since` up to `until` that appended, oldest
    first, under the conditions of `appended_between`; else None."""
    commits = _commits_between(table, since, until)
    if commits is None:
        return None
    appends = [c for c in commits if c.operation == "append"]
    return [{**{k: str(v) for k, v in c.info.items()}, "added-records": str(c.added_records)} for c in appends]


def added_since(table: Path, current: int, since_ms: float) -> list[str]:
    """The URIs of the files that the versions of the Delta table at `table` committed at or after `since_ms`
    (epoch milliseconds) added, newest version first."""
    files: list[str] = []
    version = current
    while version >= 0 and (commit := read_commit(table, version)).timestamp_ms >= since_ms:
        files += [data_path(table, a).as_uri() for a in commit.added]
        version -= 1
    return files
