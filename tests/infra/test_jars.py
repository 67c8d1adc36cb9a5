"""The JVM parts come from Maven by pinned coordinates and checksums, into the jar cache, and then work offline."""

from __future__ import annotations

import dataclasses
import zipfile
from pathlib import Path

import pytest

from infra import jars
from infra.errors import SetupError
from infra.jars import (
    MAVEN_JARS,
    POSTGRES_JDBC,
    SQLITE_JDBC,
    fetch_all,
    fetch_jars,
    maven_jar,
    session_maven_jars,
    spark_jars,
)
from infra.settings import Settings


def test_every_session_jar_is_pinned_and_cached(base_settings: Settings) -> None:
    cached = {p.name for p in spark_jars(base_settings).jars}
    assert f"iceberg-spark-runtime-4.1_2.13-{jars.ICEBERG.version}.jar" in cached
    assert SQLITE_JDBC.file_name in cached
    for jar in MAVEN_JARS:
        path = base_settings.jar_cache / jar.file_name
        assert path.is_file(), jar.coordinates  # `make setup` fetched all of them
        assert jars.file_sha256(path) == jar.sha256


def test_a_fetched_jar_whose_checksum_differs_is_refused(tmp_path: Path) -> None:
    tampered = dataclasses.replace(SQLITE_JDBC, sha256="0" * 64)
    with pytest.raises(SetupError, match=r"org\.xerial:sqlite-jdbc:.* has SHA-256 [0-9a-f]{64}, not the pinned 0{64}"):
        maven_jar(tampered, tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing half-fetched is left to be trusted later


def test_a_cached_jar_needs_no_maven_and_a_broken_one_is_fetched_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cached = tmp_path / SQLITE_JDBC.file_name
    with zipfile.ZipFile(cached, "w") as zf:
        zf.writestr(SQLITE_JDBC.marker, b"")
    monkeypatch.setattr(jars.shutil, "which", lambda _: None)
    assert maven_jar(SQLITE_JDBC, tmp_path) == cached  # offline: no Maven call
    cached.write_bytes(b"not a jar")
    with pytest.raises(SetupError) as err:
        maven_jar(SQLITE_JDBC, tmp_path)
    assert str(err.value) == (
        f"jar {SQLITE_JDBC.coordinates} is not in the jar cache {tmp_path} and Maven is missing to fetch it: install "
        "it ('apt-get install maven') and run 'make setup'"
    )
    assert not cached.exists()


def test_setup_fetches_the_sessions_jars_and_every_pinned_jar_only_when_asked(
    base_settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make demo`'s set-up needs only what the embedded default's sessions load; `make setup-full` every jar."""
    cache = tmp_path / "jars"
    cache.mkdir()
    for jar in MAVEN_JARS:
        if jar is not POSTGRES_JDBC:
            (cache / jar.file_name).hardlink_to(base_settings.jar_cache / jar.file_name)
    monkeypatch.setattr(jars.shutil, "which", lambda _: None)  # any fetch would fail: Maven is "missing"
    session = session_maven_jars(base_settings)
    assert POSTGRES_JDBC not in session and SQLITE_JDBC in session
    assert [p.name for p in fetch_jars(session, cache)] == [jar.file_name for jar in session]
    with pytest.raises(SetupError, match=r"jar org\.postgresql:postgresql:[0-9.]+ is not in the jar cache .*Maven"):
        fetch_all(cache)
    postgres_home = dataclasses.replace(base_settings, catalog_uri="jdbc:postgresql://127.0.0.1:5432/catalog")
    assert POSTGRES_JDBC in session_maven_jars(postgres_home) and SQLITE_JDBC not in session_maven_jars(postgres_home)


def test_the_jar_fetch_runs_on_the_standard_library_alone(base_settings: Settings) -> None:
    """`infra/setup.sh` runs `python -m infra.jars` with the system's Python while pip fills the venv: no package of
    the venv may be needed (the jars are cached already here, so Maven is not run)."""
    import subprocess
    import sys

    from tests.support.repo import REPO

    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "TRIBUTARY_HOME": str(base_settings.home)}
    bare = [sys.executable, "-S", "-c"]  # no site-packages: the standard library and the repository only
    done = subprocess.run(
        [*bare, "import sys; sys.path.insert(0, '.'); from infra.jars import main; sys.exit(main())"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    imported = subprocess.run(
        [*bare, "import sys; sys.path.insert(0, '.'); import infra.jars; print(sorted(sys.modules))"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert "pyspark" not in imported and "pyarrow" not in imported and "'infra.jars'" in imported
