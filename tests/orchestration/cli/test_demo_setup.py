"""What `make demo` defers: the driver JVM's class archive is recorded in the background after the first demo."""

from __future__ import annotations

import time

from infra import class_archive
from orchestration.cli import demo as cli


def test_a_missing_class_archive_is_recorded_in_the_background_after_the_demo(
    base_settings, tmp_path, monkeypatch, capsys
):
    recorded = class_archive.archive_path(base_settings)
    assert recorded.is_file()  # `make test`'s set-up recorded it; the child finds it and records nothing again
    settings = base_settings.with_home(tmp_path / "home")
    monkeypatch.setattr(class_archive, "archive_path", lambda _settings: tmp_path / "missing.jsa")
    started = time.monotonic()
    cli._record_class_archive_later(settings)
    assert time.monotonic() - started < 2  # it does not wait for the recording
    log = settings.home / "logs" / "class-archive.log"
    assert f"in the background (about half a minute; later JVMs start faster): {log}" in capsys.readouterr().out
    deadline = time.monotonic() + 60
    while f"ok  {recorded}" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert f"ok  {recorded}" in log.read_text()


def test_an_archive_in_place_starts_nothing(base_settings, tmp_path, capsys):
    settings = base_settings.with_home(tmp_path / "home")
    cli._record_class_archive_later(settings)
    assert capsys.readouterr().out == "" and not (settings.home / "logs").exists()
