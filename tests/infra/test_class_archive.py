"""The driver JVM's class archive: used when recorded, never when damaged, never required."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import replace

import pytest

from infra import class_archive
from infra.spark import DRIVER_JAVA_OPTIONS, spark_conf
from tests.support.repo import REPO


def test_without_an_archive_the_jvm_starts_as_usual(base_settings, tmp_path):
    # The jars (and their verification stamps) of the session's cache, linked, without its archives: an empty
    # cache would fetch and compile every jar again before the options could be read.
    for item in base_settings.jar_cache.iterdir():
        if item.suffix != ".jsa":
            (tmp_path / item.name).symlink_to(item)
    settings = replace(base_settings, jar_cache=tmp_path)
    assert class_archive.use_options(settings) == []
    options = spark_conf(settings)[DRIVER_JAVA_OPTIONS]
    assert "SharedArchiveFile" not in options and "-Dderby.system.home=" in options


def test_a_users_driver_java_options_are_added_to_the_platforms_own(base_settings):
    """`spark.driver.extraJavaOptions` in TRIBUTARY_SPARK_CONF (a GC or JIT choice) keeps the log settings, Derby's
    home and the class archive that Tributary passes the driver."""
    given = (DRIVER_JAVA_OPTIONS, "-XX:+UseSerialGC -Dx=1")
    options = spark_conf(replace(base_settings, spark_conf=(*base_settings.spark_conf, given)))[DRIVER_JAVA_OPTIONS]
    assert options == f"{spark_conf(base_settings)[DRIVER_JAVA_OPTIONS]} -XX:+UseSerialGC -Dx=1"
    assert "-Dderby.system.home=" in options and "-XX:SharedArchiveFile=" in options


def test_a_half_written_archive_is_not_used(base_settings, tmp_path):
    settings = replace(base_settings, jar_cache=tmp_path)
    target = class_archive.archive_path(settings)
    target.with_name(f".{target.name}.123.tmp").write_bytes(b"partial")
    assert class_archive.use_options(settings) == []


def test_archives_left_by_killed_recordings_are_removed(base_settings, tmp_path):
    settings = replace(base_settings, jar_cache=tmp_path)
    target = class_archive.archive_path(settings)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = target.with_name(f".{target.name}.{int(gone.stdout)}.tmp")
    mine = class_archive.candidate_path(target)
    for path in (stale, mine):
        path.write_bytes(b"partial")
    assert class_archive.remove_stale_candidates(target) == [stale]
    assert not stale.exists() and mine.exists()


@pytest.fixture
def jvm_paths(spark) -> tuple[str, str]:
    jvm = spark.sparkContext._jvm
    return jvm.System.getProperty("java.home"), jvm.System.getProperty("java.class.path")


def test_the_session_maps_the_archive_setup_recorded(base_settings, spark, jvm_paths):
    """`make test` runs `tributary setup` first, which records the archive; a JVM with this class path maps it
    (the JVM refuses, silently, an archive made for jars of another size or time)."""
    archive = class_archive.archive_path(base_settings)
    assert archive.is_file(), "tributary setup did not record the class archive"
    jvm = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={archive}" in arguments
    assert class_archive.refusal(archive, *jvm_paths) is None


def test_reinstalled_jars_get_a_new_archive_and_the_old_one_is_removed(base_settings, tmp_path, monkeypatch):
    """pyspark reinstalled at the same path (a new venv) keeps the jar names but not their times: the archive
    made for the old jars would be refused by every JVM, so it must not be found under the new key."""
    jars, other = tmp_path / "venv" / "jars", tmp_path / "other" / "jars"
    for folder in (jars, other):
        folder.mkdir(parents=True)
        (folder / "spark-core.jar").write_bytes(b"classes")
    settings = replace(base_settings, jar_cache=tmp_path / "cache")
    settings.jar_cache.mkdir()
    monkeypatch.setattr(class_archive, "_jar_folder", lambda: other)
    others = class_archive.archive_path(settings)
    monkeypatch.setattr(class_archive, "_jar_folder", lambda: jars)
    before = class_archive.archive_path(settings)
    legacy = settings.jar_cache / "driver-classes-69d3322d25dd912b.jsa"
    for path in (others, before, legacy):
        path.write_bytes(b"archive")
    os.utime(jars / "spark-core.jar", ns=(1, 1))
    after = class_archive.archive_path(settings)
    assert after != before and class_archive.use_options(settings) == []
    after.write_bytes(b"archive")
    assert class_archive.remove_superseded(after) == sorted([before, legacy])
    assert sorted(settings.jar_cache.iterdir()) == sorted([after, others])


def test_a_damaged_archive_is_deleted_not_promoted(base_settings, jvm_paths, tmp_path, caplog):
    """A truncated archive would crash every JVM that maps it: it must never reach the archive's name."""
    recorded = class_archive.archive_path(base_settings)
    candidate, target = tmp_path / ".archive.tmp", tmp_path / "archive.jsa"
    with recorded.open("rb") as source:
        candidate.write_bytes(source.read(4 << 20))
    assert class_archive.promote(candidate, target, *jvm_paths) is False
    assert not candidate.exists() and not target.exists()
    assert "class archive .archive.tmp not used: exit " in caplog.text


def test_a_whole_archive_is_verified_then_renamed_into_place(base_settings, jvm_paths, tmp_path, caplog):
    candidate, target = tmp_path / ".archive.tmp", tmp_path / "archive.jsa"
    shutil.copyfile(class_archive.archive_path(base_settings), candidate)
    assert class_archive.promote(candidate, target, *jvm_paths) is True, caplog.text
    assert target.is_file() and not candidate.exists()


FAILING_WORKLOAD = """
import sys
from dataclasses import replace
from pathlib import Path
from infra import class_archive
from infra.settings import Settings
from infra.spark import get_spark, record_class_archive

home = Path(sys.argv[1])
(home / "jars").mkdir()
class_archive.archive_path = lambda settings: home / "jars" / "driver-classes.jsa"
settings = replace(Settings.from_env(home=home).with_home(home), driver_memory="512m")

def workload(dumping):
    get_spark(dumping).range(3).count()
    raise RuntimeError("the workload broke")

try:
    record_class_archive(settings, workload)
except RuntimeError as exc:
    print("raised:", exc)
"""


def test_a_failed_recording_leaves_no_archive_behind(tmp_path):
    """The JVM writes what it loaded as it exits, whatever happened: a failed recording must delete that file."""
    result = subprocess.run(
        [sys.executable, "-c", FAILING_WORKLOAD, str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert "raised: the workload broke" in result.stdout, result.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "jars").iterdir()) == []
