"""Each JVM's temp files live in a scratch folder of its own, removed by the next claim once its owner has ended."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from infra import scratch
from tests.support.jvm import short_lived
from tests.support.repo import REPO


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_a_killed_jvm_leaves_its_files_only_in_its_scratch_folder_and_the_next_claim_removes_them(tmp_path):
    root = tmp_path / "scratch"
    env = {**short_lived(dict(os.environ)), "TRIBUTARY_HOME": str(tmp_path / "home"), "TRIBUTARY_SCRATCH": str(root)}
    child = subprocess.run(
        [sys.executable, "-m", "tests.support.scratch_child", str(tmp_path / "home")],
        cwd=REPO,
        env=env,
        start_new_session=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == -9, child.stderr[-3000:]
    folder = Path(child.stdout.strip())
    assert folder.parent == root
    left = {p.name.split("-")[0] for p in folder.iterdir()}
    # Spark's folders (jar copies, the block manager) and the unpacked native libraries of the killed JVM.
    assert {"spark", "blockmgr"} <= left and _size(folder) > 10_000_000
    alive = scratch.claim(root)
    try:
        assert not folder.exists()
        assert [p for p in root.iterdir()] == [alive.path]
        assert scratch.sweep(root) == []  # a live owner's folder is kept
    finally:
        alive.release()
    assert scratch.sweep(root) == [alive.path]


def test_a_folder_handed_to_a_child_stays_while_the_child_lives(tmp_path):
    handed = scratch.claim(tmp_path)
    child = subprocess.Popen(["sleep", "30"], pass_fds=(handed.fd,))
    handed.release()
    try:
        assert scratch.sweep(tmp_path) == [] and handed.path.is_dir()
    finally:
        child.kill()
        child.wait()
    assert scratch.sweep(tmp_path) == [handed.path]


def test_folders_that_are_not_claims_are_left_alone(tmp_path):
    (tmp_path / "someone-elses").mkdir()
    (tmp_path / "a-file").write_text("x")
    fresh = tmp_path / ".claiming-abc"
    fresh.mkdir()
    assert scratch.sweep(tmp_path) == []
    os.utime(fresh, (0, 0))  # a claim killed before its rename, long ago
    assert scratch.sweep(tmp_path) == [fresh]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "someone-elses"]
