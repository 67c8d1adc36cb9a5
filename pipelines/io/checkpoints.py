"""Reading Spark streaming checkpoints: planned and committed batches, watermarks, restart positions.

Every read of a checkpoint's logs lives here, but a file source's log (`file_source_log`). Each entry of
`offsets/` and `commits/` is a version line, a metadata JSON line (watermark, batch time) and, in `offsets/`,
one offset line per source.

Spark writes `offsets/<n>` before it runs batch n and `commits/<n>` after the batch is written. On restart,
a committed last batch means the next batch starts at the end offset of `offsets/<n>`; an uncommitted one is
re-run from the end offset of `offsets/<n-1>` (or, for batch 0, from the source's initial offset that Iceberg
keeps in `sources/<i>/offsets/0`, which `pin_initial_offsets` moves forward). The Iceberg source's offsets are
JSON carrying `snapshot_id`. The stream then walks forward from that snapshot through every later snapshot, so
it needs that snapshot and all its descendants to still exist.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from infra.errors import PipelineError
from infra.files import write_atomically
from infra.settings import Settings
from pipelines.io.change_positions import changes_read
from pipelines.spec.registry import Registry


@dataclass(frozen=True)
class ConsumerPosition:
    """The upstream snapshot a downstream consumer restarts from.

    `snapshot_id` is None when the consumer has not read a snapshot yet: its next run starts at the oldest
    snapshot of the upstream table, so it needs the table's whole history.
    """

    consumer: str
    checkpoint: Path
    snapshot_id: int | None
    batch_id: int | None
    committed: bool
    # Every snapshot id in the restart offsets: a query with several Iceberg sources lists one per source,
    # so the caller keeps those that belong to the table it maintains.
    candidates: tuple[int, ...] = ()

    def describe(self) -> str:
        """One line for error messages and logs."""
        if self.snapshot_id is None:
            return (
                f"consumer {self.consumer} has not read any snapshot yet (checkpoint {self.checkpoint}) "
                "and needs the whole history"
            )
        state = "committed" if self.committed else "uncommitted, will be re-run"
        return (
            f"consumer {self.consumer} restarts from snapshot {self.snapshot_id} "
            f"(batch {self.batch_id} {state}; checkpoint {self.checkpoint})"
        )


def batch_files(folder: Path) -> dict[int, Path]:
    """The numbered entries of a checkpoint log folder (`offsets/`, `commits/`) by batch id."""
    if not folder.is_dir():
        return {}
    return {int(p.name): p for p in folder.iterdir() if p.name.isdigit() and p.is_file()}


def last_planned_batch(checkpoint: Path) -> int | None:
    """The id of the last batch the query at `checkpoint` planned (`offsets/<n>`), if any."""
    return max(batch_files(checkpoint / "offsets"), default=None)


def last_committed_batch(checkpoint: Path) -> int | None:
    """The id of the last batch the query at `checkpoint` committed (`commits/<n>`), if any."""
    return max(batch_files(checkpoint / "commits"), default=None)


def pending_batch(checkpoint: Path) -> int | None:
    """The id of a batch that was planned (`offsets/<n>`) but never committed (`commits/<n>`), if any.

    Spark re-runs such a batch first when the query restarts, with the same input it planned.
    """
    offsets = batch_files(checkpoint / "offsets")
    if not offsets:
        return None
    last = max(offsets)
    return None if last in batch_files(checkpoint / "commits") else last


def query_id(checkpoint: Path) -> str:
    """The streaming query's id, written once in the checkpoint's `metadata` file and stable across restarts."""
    return json.loads((checkpoint / "metadata").read_text())["id"]


def batch_metadata(entry: Path) -> dict:
    """The metadata of one offsets or commits entry: the JSON on its second line (after the version line)."""
    lines = entry.read_text().splitlines()
    return json.loads(lines[1]) if len(lines) > 1 and lines[1].strip() else {}


def committed_watermark_ms(checkpoint: Path) -> int:
    """The event-time watermark (ms) the query at `checkpoint` uses for its next batch; 0 before any batch.

    Spark records the watermark for the next batch in the commit log (`commits/<n>`: nextBatchWatermarkMs); a
    planned but uncommitted batch is re-run with the watermark stored in its offsets entry (`offsets/<n>`).
    """
    offsets = batch_files(checkpoint / "offsets")
    if not offsets:
        return 0
    last = max(offsets)
    commits = batch_files(checkpoint / "commits")
    if last in commits:
        return int(batch_metadata(commits[last]).get("nextBatchWatermarkMs", 0))
    return int(batch_metadata(offsets[last]).get("batchWatermarkMs", 0))


def late_events_watermark_ms(checkpoint: Path) -> int:
    """The watermark (ms) Spark judges the input rows of the query's next batch against; 0 before any batch.

    A stateful operator drops a row as late against the watermark of the batch *before* the one it runs in
    (it evicts state against its own batch's): the `batchWatermarkMs` in `offsets/<n>` of the last committed
    batch, or, when the last planned batch is re-run, of the batch before it. A run that ended with Spark's
    no-data batch leaves both equal to `committed_watermark_ms`.
    """
    offsets = batch_files(checkpoint / "offsets")
    if not offsets:
        return 0
    last = max(offsets)
    previous = last if last in batch_files(checkpoint / "commits") else last - 1
    if previous not in offsets:
        return 0
    return int(batch_metadata(offsets[previous]).get("batchWatermarkMs", 0))


def settled_offsets(checkpoint: Path) -> list[dict] | None:
    """The source offsets (parsed JSON, one per source) of the last batch the query at `checkpoint` committed, when
    it owes nothing: no planned batch is uncommitted and no no-data batch is due (the watermark the last batch
    committed for the next one equals the one it ran with). None before any batch and while something is owed."""
    offsets = batch_files(checkpoint / "offsets")
    if not offsets:
        return None
    last = max(offsets)
    commits = batch_files(checkpoint / "commits")
    if last not in commits:
        return None
    ran_with = int(batch_metadata(offsets[last]).get("batchWatermarkMs", 0))
    advanced = int(batch_metadata(commits[last]).get("nextBatchWatermarkMs", 0)) != ran_with
    # A query that finished by itself after this batch already decided it owed no no-data batch (a restarted
    # query never runs one without new data); one killed before deciding may owe it.
    if advanced and _finished_after(checkpoint) != last:
        return None
    return source_offsets(offsets[last])


def source_offsets(entry: Path) -> list[dict]:
    """The source offsets (parsed JSON, one per source) of one `offsets/<n>` entry."""
    lines = entry.read_text().splitlines()[2:]
    values = [json.loads(line) if line.startswith("{") else None for line in lines]
    return [v for v in values if isinstance(v, dict)]


def caught_up_offsets(checkpoint: Path) -> set[tuple[int, int]] | None:
    """The Iceberg end offsets (snapshot id, position) of `settled_offsets`: position is how many files of that
    snapshot's added data files the stream has read."""
    settled = settled_offsets(checkpoint)
    if settled is None:
        return None
    return {(int(v["snapshot_id"]), int(v.get("position", 0))) for v in settled if "snapshot_id" in v}


def committed_source_offsets(checkpoint: Path) -> list[dict]:
    """The source offsets of the last committed batch (where a restarted query resumes); [] before any."""
    entry = batch_files(checkpoint / "offsets").get(last_committed_batch(checkpoint))  # type: ignore[arg-type]
    return source_offsets(entry) if entry is not None else []


def plan_owed_no_data_batch(checkpoint: Path) -> int | None:
    """Plan the no-data batch that a query killed right after committing a batch still owes; return its id.

    After a batch that moved the watermark, Spark runs one more batch without data: the one in which append-mode
    windows, sessions and join rows that the new watermark closes are emitted and their state dropped. It
    records that watermark with the committed batch (`commits/<n>`: nextBatchWatermarkMs), but a restarted query
    runs a batch only when new data arrives, so a run killed between the commit and the next plan would leave
    those rows unwritten until more data lands (and a re-run would end "caught up" without them). Writing
    `offsets/<n+1>` as Spark would have (the same end offsets, the committed watermark) makes the restarted query
    re-run it as an interrupted batch, with no data: the batch the uninterrupted run would have run.
    """
    offsets = batch_files(checkpoint / "offsets")
    if not offsets:
        return None
    last = max(offsets)
    commits = batch_files(checkpoint / "commits")
    if last not in commits or _finished_after(checkpoint) == last:
        return None
    planned = batch_metadata(offsets[last])
    watermark = int(batch_metadata(commits[last]).get("nextBatchWatermarkMs", 0))
    if watermark <= int(planned.get("batchWatermarkMs", 0)):
        return None
    version, _, *positions = offsets[last].read_text().splitlines()
    metadata = {**planned, "batchWatermarkMs": watermark, "batchTimestampMs": int(time.time() * 1000)}
    owed = last + 1
    (checkpoint / "offsets" / f".{owed}.crc").unlink(missing_ok=True)
    write_atomically(checkpoint / "offsets" / str(owed), "\n".join([version, json.dumps(metadata), *positions]))
    return owed


def pin_initial_offsets(checkpoint: Path, alive: Callable[[int], bool] = lambda _: False) -> int:
    """Move each Iceberg source's initial offset (`sources/<i>/offsets/0`) to where its last committed batch ended;
    return how many were moved.

    Under availableNow, Iceberg's stream (1.12.0) walks from that initial offset to plan a run's end, so every run
    fails once maintenance expired it; moved only then (`alive` says which snapshots exist), since from the
    committed end the walk finds nothing when no append followed, and Iceberg fails on that null end offset.
    """
    last = last_committed_batch(checkpoint)
    if last is None:
        return 0
    lines = batch_files(checkpoint / "offsets")[last].read_text().splitlines()[2:]
    folders = sorted((p for p in (checkpoint / "sources").glob("*") if p.name.isdigit()), key=lambda p: int(p.name))
    if len(folders) != len(lines):
        return 0
    moved = 0
    for folder, line in zip(folders, lines, strict=True):
        initial = folder / "offsets" / "0"
        value = json.loads(line) if line.startswith("{") else None
        if not initial.is_file() or not isinstance(value, dict) or "snapshot_id" not in value:
            continue
        if any(alive(i) for i in _snapshot_ids(initial.read_text(), initial)):
            continue
        if initial.read_text().strip() != line.strip():
            (initial.parent / ".0.crc").unlink(missing_ok=True)  # Hadoop's checksum of the old text would refuse it
            write_atomically(initial, line.strip())
            moved += 1
    return moved


def mark_finished(checkpoint: Path) -> None:
    """Record that the query at `checkpoint` finished by itself (bounded trigger) after its last committed batch."""
    last = last_committed_batch(checkpoint)
    if last is None:
        return
    write_atomically(checkpoint / _FINISHED, json.dumps({"batch_id": last}))


def _finished_after(checkpoint: Path) -> int | None:
    try:
        return int(json.loads((checkpoint / _FINISHED).read_text())["batch_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


_FINISHED = "tributary_finished.json"


def _snapshot_ids(text: str, path: Path) -> list[int]:
    """Snapshot ids in the source-offset lines of an offsets file (or a bare initial-offset JSON)."""
    ids = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PipelineError(f"checkpoint file {path} is not readable JSON at {line[:80]!r}: {exc}") from exc
        if isinstance(value, dict) and "snapshot_id" in value:
            ids.append(int(value["snapshot_id"]))
    return ids


def _initial_snapshots(checkpoint: Path) -> list[int]:
    ids: list[int] = []
    for initial in sorted((checkpoint / "sources").glob("*/offsets/0")):
        ids.extend(i for i in _snapshot_ids(initial.read_text(), initial) if i >= 0)
    return ids


def restart_position(consumer: str, checkpoint: Path) -> ConsumerPosition:
    """The snapshot `consumer` (a stream reading one Iceberg table) will restart from, read from its checkpoint.
    A consumer that follows changes restarts from the commits its ledger records (`change_positions`)."""
    read = changes_read(checkpoint)
    if read is not None:
        ids = [p.commit for p in read.upstreams.values() if p.commit is not None]
        return ConsumerPosition(consumer, checkpoint, min(ids, default=None), read.batch, True, tuple(ids))
    offsets = batch_files(checkpoint / "offsets")
    if not offsets:
        return ConsumerPosition(consumer, checkpoint, None, None, False)
    last = max(offsets)
    committed = last in batch_files(checkpoint / "commits")
    if committed:
        source = offsets[last]
    elif last - 1 in offsets:
        source = offsets[last - 1]
    else:
        initial = _initial_snapshots(checkpoint)
        return ConsumerPosition(consumer, checkpoint, min(initial, default=None), last, False, tuple(initial))
    # START_OFFSET (snapshot -1) means the upstream was empty: the next run starts at its oldest snapshot.
    ids = [i for i in _snapshot_ids(source.read_text(), source) if i >= 0]
    return ConsumerPosition(consumer, checkpoint, min(ids, default=None), last, committed, tuple(ids))


def consumer_positions(settings: Settings, registry: Registry, table: str) -> list[ConsumerPosition]:
    """Where every downstream consumer of `table` that the registry knows restarts from."""
    return [restart_position(spec.name, settings.checkpoint_for(spec.name)) for spec in registry.downstream_of(table)]
