"""What a checkpoint says a query owes: a run with nothing owed and nothing new starts no query."""

from __future__ import annotations

import json
from pathlib import Path

from pipelines.io.checkpoints import caught_up_offsets, mark_finished, pin_initial_offsets

SNAPSHOT = 7822080852644853885


def _checkpoint(root: Path, ran_with: int, next_watermark: int, committed: bool = True) -> Path:
    """A checkpoint of one Iceberg-source batch, as Spark writes it (version line, metadata, source offsets)."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    offset = {"version": 1, "snapshot_id": SNAPSHOT, "position": 1, "scan_all_files": False}
    (root / "offsets" / "0").write_text(
        f"v1\n{json.dumps({'batchWatermarkMs': ran_with, 'batchTimestampMs': 1})}\n{json.dumps(offset)}\n"
    )
    if committed:
        (root / "commits" / "0").write_text(f"v1\n{json.dumps({'nextBatchWatermarkMs': next_watermark})}\n")
    return root


def test_a_moved_watermark_is_owed_until_the_query_finishes_by_itself(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path / "moved", ran_with=0, next_watermark=1_793_512_573_689)
    # Killed after the batch committed, before Spark decided on a no-data batch: it may be owed.
    assert caught_up_offsets(checkpoint) is None
    # The query went on and stopped by itself: Spark decided nothing more was owed.
    mark_finished(checkpoint)
    assert caught_up_offsets(checkpoint) == {(SNAPSHOT, 1)}


def test_nothing_is_owed_without_a_moved_watermark_and_an_uncommitted_batch_is(tmp_path: Path) -> None:
    assert caught_up_offsets(_checkpoint(tmp_path / "still", ran_with=5, next_watermark=5)) == {(SNAPSHOT, 1)}
    pending = _checkpoint(tmp_path / "pending", ran_with=0, next_watermark=0, committed=False)
    mark_finished(pending)  # nothing committed: nothing to mark
    assert caught_up_offsets(pending) is None


def test_a_finished_mark_for_an_older_batch_does_not_count(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path / "older", ran_with=0, next_watermark=10)
    (checkpoint / "tributary_finished.json").write_text(json.dumps({"batch_id": -1}))
    assert caught_up_offsets(checkpoint) is None


def test_the_initial_offset_moves_to_the_committed_end_and_only_then(tmp_path: Path) -> None:
    first = {"version": 1, "snapshot_id": 11, "position": 0, "scan_all_files": False}
    pending = _checkpoint(tmp_path / "pending", ran_with=0, next_watermark=0, committed=False)
    for checkpoint in (pending, _checkpoint(tmp_path / "done", ran_with=0, next_watermark=0)):
        (checkpoint / "sources" / "0" / "offsets").mkdir(parents=True)
        (checkpoint / "sources" / "0" / "offsets" / "0").write_text(json.dumps(first))
        (checkpoint / "sources" / "0" / "offsets" / ".0.crc").write_bytes(b"stale")
    # Nothing committed: the query still starts from its initial offset, which stays.
    assert pin_initial_offsets(pending) == 0
    assert json.loads((pending / "sources" / "0" / "offsets" / "0").read_text()) == first
    done = tmp_path / "done"
    assert pin_initial_offsets(done) == 1
    initial = done / "sources" / "0" / "offsets"
    assert json.loads((initial / "0").read_text())["snapshot_id"] == SNAPSHOT
    assert json.loads((initial / "0").read_text())["position"] == 1
    assert not (initial / ".0.crc").exists()
    assert pin_initial_offsets(done) == 0  # already there
