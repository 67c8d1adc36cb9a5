"""Opening the catalog database: several processes may create it at once (two runs started together)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from tests.support.homes import make_settings

OPENERS = 6


def _open(home: str, barrier: multiprocessing.synchronize.Barrier, results: multiprocessing.Queue) -> None:
    from infra.catalog import pyiceberg_catalog

    settings = make_settings(Path(home))
    barrier.wait()
    try:
        results.put(("ok", [tuple(n) for n in pyiceberg_catalog(settings).list_namespaces()]))
    except Exception as exc:  # reported to the test, which names it
        results.put(("failed", f"{type(exc).__name__}: {str(exc).splitlines()[0]}"))


def test_processes_creating_one_new_catalog_at_once_all_open_it(tmp_path):
    context = multiprocessing.get_context("fork")  # no Spark here: the children only open the SQLite catalog
    outcomes = []
    for attempt in range(4):
        home = tmp_path / f"home-{attempt}"
        barrier, results = context.Barrier(OPENERS), context.Queue()
        children = [context.Process(target=_open, args=(str(home), barrier, results)) for _ in range(OPENERS)]
        for child in children:
            child.start()
        outcomes += [results.get(timeout=60) for _ in children]
        for child in children:
            child.join(timeout=60)
        assert (home / "catalog.db").exists() or any(home.rglob("*.db"))
    assert [o for o in outcomes if o[0] != "ok"] == []
    assert len(outcomes) == 4 * OPENERS
