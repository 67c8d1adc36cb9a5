"""Landed lines are counted once per file version: a reconciliation re-reads only files new or changed since."""

from __future__ import annotations

import os

from pipelines.authoring.load import load_registry
from pipelines.sources import landed_lines
from tests.support.homes import make_settings

SOURCE = load_registry(["pipelines.datasets.ecommerce"]).get("bronze.events").source


def test_line_counts_are_kept_per_file_version_and_a_changed_file_is_counted_again(tmp_path, monkeypatch):
    settings = make_settings(tmp_path / "home")
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text('{"x":1}\n{"x":2}\n')
    b.write_text('{"x":1}\n\n{"x":3}\n{"x":4}\n')  # a blank line is not a row
    assert landed_lines._counted_lines(settings, "t.main", {"a": a, "b": b}, SOURCE) == {"a": 2, "b": 3}

    counted = []
    real = landed_lines._lines
    monkeypatch.setattr(landed_lines, "_lines", lambda path, source: counted.append(path.name) or real(path, source))
    assert landed_lines._counted_lines(settings, "t.main", {"a": a, "b": b}, SOURCE) == {"a": 2, "b": 3}
    assert counted == []  # both known: nothing read again

    stat = a.stat()
    a.write_text('{"x":1}\n{"x":9}\n')  # same size, rewritten in place: a new modification time
    os.utime(a, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    b.write_text('{"x":1}\n')
    assert landed_lines._counted_lines(settings, "t.main", {"a": a, "b": b}, SOURCE) == {"a": 2, "b": 1}
    assert sorted(counted) == ["a.json", "b.json"]
