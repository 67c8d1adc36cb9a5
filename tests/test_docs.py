"""The examples in the README and the docs run: each page's Python blocks, in order, are one dataset module (its
SQL tables beside it), imported and planned as `tributary validate` plans a dataset, with no problem.

A block that reads another system's table names a path a reader does not have (`/data/...`): the test puts a
table of the same shape there (`_STAND_INS`) and points the example at it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from pipelines.authoring.load import check_datasets
from pipelines.authoring.schemas import uncached
from tests.support.packages import write_package
from tests.support.repo import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_DECLARES = re.compile(r"@tb\.|tb\.landing\(")
_SQL_TABLE = re.compile(r"^--\s*(keys|refresh|table)\s*:", re.MULTILINE)


def _crm_customers(folder: Path) -> None:
    rows = pa.table({"id": pa.array([1], pa.int64()), "name": ["ada"], "tier": ["gold"]})
    write_deltalake(str(folder), rows, configuration={"delta.enableChangeDataFeed": "true"})


_STAND_INS = {"/data/crm/customers": _crm_customers}


def blocks(page: Path, language: str) -> list[str]:
    """The fenced blocks of `page` in `language`, in order."""
    return [m.group(2) for m in _FENCE.finditer(page.read_text(encoding="utf-8")) if m.group(1) == language]


def _pages_with_examples() -> list[Path]:
    return [p for p in PAGES if blocks(p, "python") or any(_SQL_TABLE.search(b) for b in blocks(p, "sql"))]


def test_the_pages_with_examples_are_found():
    """The fence pattern finds the examples (so the test below can fail)."""
    found = {p.name for p in _pages_with_examples()}
    assert {"README.md", "authoring.md", "streaming.md", "kafka.md", "quality.md", "landing.md"} <= found


@pytest.mark.parametrize("page", _pages_with_examples(), ids=lambda p: p.name)
def test_a_pages_examples_load_and_plan(spark, tmp_path, page):
    module = "\n\n".join(blocks(page, "python"))
    for path, make in _STAND_INS.items():
        if path in module:
            stand_in = tmp_path / "external" / path.strip("/").replace("/", "_")
            make(stand_in)
            module = module.replace(path, str(stand_in))
    tables = [b for b in blocks(page, "sql") if _SQL_TABLE.search(b)]
    if not tables and not _DECLARES.search(module):  # code that declares no table (e.g. printed by tributary infer)
        exec(compile(module, str(page), "exec"), {})
        return
    files = {"tables.py": module, **{f"example_{i}.sql": sql for i, sql in enumerate(tables)}}
    package = write_package(tmp_path / "packages", f"docs_{page.stem.lower()}", files)
    with uncached():
        result = check_datasets([package])
    assert not result.problems, "\n".join(result.problems)
    assert len(result.registry) > 0


def test_the_run_log_section_names_every_column_of_ops_run_log():
    from pipelines.run.run_log import SCHEMA

    page = (REPO / "docs" / "analysts.md").read_text(encoding="utf-8")
    section = page[page.index("### The run log: `ops.run_log`") :].split("```", 1)[0]
    assert [name for name in SCHEMA.names if f"`{name}`" not in section] == []
