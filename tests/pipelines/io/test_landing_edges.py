"""Every landed byte is accounted for, and no value is changed on the way: line ends, concatenated objects,
decimals, surrogates, re-sent keys, links and subfolders, through real runs of bronze and silver.

For each landed file, bronze rows (corrupt records included) equal the file's lines as Spark's text reader splits
them (`\\n`, `\\r\\n`, a lone `\\r`), and the reconciliation check agrees.
"""

from __future__ import annotations

import json
import os
import random
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from infra.errors import PipelineError
from infra.settings import Settings
from pipelines.io.landing import count_records, is_blank, landed_lines
from pipelines.run.runner import run_table
from pipelines.sources.report import RunReport
from quality.reconcile import Pipeline, reconcile_pipeline
from tests.support.helpers import table
from tests.support.homes import make_settings
from tests.support.landing_registry import orders_registry


def _order(order_id: str, at: str = "2026-01-03T10:00:00Z", price: object = 2.5) -> str:
    return json.dumps({"order_id": order_id, "quantity": 1, "price": price, "ordered_at": at, "customer": "c"})


def _objects(*ids: str) -> list[str]:
    return [_order(i) for i in ids]


JSON_FILES: dict[str, bytes] = {
    "lf.json": "\n".join(_objects("lf1", "lf2", "lf3")).encode() + b"\n",
    "crlf.json": "\r\n".join(_objects("crlf1", "crlf2", "crlf3")).encode() + b"\r\n",
    "cr.json": "\r".join(_objects("cr1", "cr2", "cr3")).encode(),  # no final line end
    "mixed.json": (_order("mx1") + "\r" + _order("mx2") + "\r\n\r\n" + _order("mx3") + "\n \n").encode(),
    # Two objects on one line: one corrupt record each line, nothing silently dropped.
    "concat.json": (_order("cc1") + _order("cc2") + "\n" + _order("cc3") + " " + _order("cc4") + "\n").encode()
    + (_order("cc5") + "\n").encode(),
    "decimals.json": "\n".join([_order("d1", price="PRICE"), _order("d2", price=10.5), _order("d3", price=15.0)])
    .replace('"PRICE"', "10.555")
    .replace("15.0,", "1.5e1,")
    .encode()
    + b"\n",
    "surrogate.json": b'{"order_id": "s1", "customer": "\\ud800"}\n{"order_id": "s2", "customer": "\\ud83d\\ude00"}\n',
}
CSV_HEADER = "order_id,quantity,price,ordered_at,customer"
CSV_FILES: dict[str, bytes] = {
    "cr.csv": "\r".join(
        [CSV_HEADER, "c1,1,1.00,2026-01-02 00:00:00,cy", "c2,2,10.555,2026-01-02 00:01:00,cid"]
    ).encode(),
}


REPORTS: dict[str, RunReport] = {}


@pytest.fixture(scope="module")
def home(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    settings = make_settings(tmp_path_factory.mktemp("edges"))
    for dataset, files in (("edges_json", JSON_FILES), ("edges_csv", CSV_FILES)):
        folder = settings.landing / dataset
        folder.mkdir(parents=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)
    for dataset, fmt in (("edges_json", "json"), ("edges_csv", "csv")):
        for spec in orders_registry(dataset, fmt):
            REPORTS[spec.name] = run_table(spark, settings, spec)
    return settings


def _bronze(spark: SparkSession, settings: Settings, dataset: str) -> list[dict]:
    rows = table(spark, settings, f"bronze.{dataset}").collect()
    return [{**r.asDict(), "file": Path(r["_source_file"]).name} for r in rows]


def _line_count(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(1 for line in landed_lines(fh) if not is_blank(line))


def test_line_ends_split_at_lf_crlf_and_lone_cr() -> None:
    text = b"a\nb\r\nc\rd\r\r\ne"
    assert [line for line in landed_lines(_Chunks(text, 1)) if not is_blank(line)] == [b"a", b"b", b"c", b"d", b"e"]
    assert list(landed_lines(_Chunks(b"x\r\n", 2))) == [b"x"]


def test_counted_records_equal_the_non_blank_lines_for_any_bytes_and_reads() -> None:
    pieces = [b"a", b"{}", b" ", b"\t", b"\x0b", b"\n", b"\r", b"\r\n", b"\xef\xbb\xbf", b"\xef\xbc\x81", b"\x00"]
    rnd = random.Random(7)
    for _ in range(400):
        data = b"".join(rnd.choice(pieces) for _ in range(rnd.randrange(0, 30)))
        expected = sum(1 for line in landed_lines(_Chunks(data, 1 << 20)) if not is_blank(line))
        for size in (1, 2, 3, 1 << 20):
            assert count_records(_Chunks(data, size)) == expected, (data, size)


class _Chunks:
    """A binary file that returns at most `size` bytes per read (lines split across reads)."""

    def __init__(self, data: bytes, size: int) -> None:
        self.data, self.size = data, size

    def read(self, _: int) -> bytes:
        out, self.data = self.data[: self.size], self.data[self.size :]
        return out


def test_every_line_of_every_file_is_one_bronze_row(spark: SparkSession, home: Settings) -> None:
    for dataset in ("edges_json", "edges_csv"):
        rows = _bronze(spark, home, dataset)
        folder = home.landing / dataset
        for path in folder.iterdir():
            header = 1 if path.suffix == ".csv" else 0
            assert sum(r["file"] == path.name for r in rows) == _line_count(path) - header, path.name
    ids = {r["order_id"] for r in _bronze(spark, home, "edges_json") if r["_corrupt_record"] is None}
    assert {"lf1", "lf2", "lf3", "crlf1", "crlf2", "crlf3", "cr1", "cr2", "cr3", "mx1", "mx2", "mx3"} <= ids


def test_concatenated_objects_are_corrupt_records_holding_the_whole_line(spark: SparkSession, home: Settings) -> None:
    rows = [r for r in _bronze(spark, home, "edges_json") if r["file"] == "concat.json"]
    corrupt = sorted(r["_corrupt_record"] for r in rows if r["_corrupt_record"] is not None)
    assert corrupt == sorted([_order("cc1") + _order("cc2"), _order("cc3") + " " + _order("cc4")])
    assert [r["order_id"] for r in rows if r["_corrupt_record"] is None] == ["cc5"]
    health = {Path(r["file"]).name: r for r in table(spark, home, "bronze.edges_json_files").collect()}
    assert (health["concat.json"]["rows"], health["concat.json"]["corrupt_rows"]) == (3, 2)


def test_a_decimal_that_does_not_fit_its_scale_is_rescued_with_its_text(spark: SparkSession, home: Settings) -> None:
    rows = {r["order_id"]: r for r in _bronze(spark, home, "edges_json") if r["file"] == "decimals.json"}
    assert rows["d1"]["price"] is None and json.loads(rows["d1"]["_rescued_data"]) == {"price": "10.555"}
    assert rows["d1"]["_corrupt_record"] is not None
    assert (rows["d2"]["price"], rows["d3"]["price"]) == (Decimal("10.50"), Decimal("15.00"))
    csv = {r["order_id"]: r for r in _bronze(spark, home, "edges_csv")}
    assert csv["c1"]["price"] == Decimal("1.00")
    assert csv["c2"]["price"] is None and json.loads(csv["c2"]["_rescued_data"]) == {"price": "10.555"}
    assert csv["c2"]["_corrupt_record"] == "c2,2,10.555,2026-01-02 00:01:00,cid"
    # Spark's CSV reader read the file first; the decimal needs its line back, so the batch was parsed per line.
    assert REPORTS["bronze.edges_csv"].metrics["batches_parsed_again"] == 1
    assert "files_read_by_csv_reader" not in REPORTS["bronze.edges_csv"].metrics
    silver = {r.order_id: r.price for r in table(spark, home, "silver.edges_json").collect()}
    assert "d1" not in silver and silver["d2"] == Decimal("10.50")


def test_a_lone_surrogate_is_a_corrupt_record_not_a_question_mark(spark: SparkSession, home: Settings) -> None:
    rows = [r for r in _bronze(spark, home, "edges_json") if r["file"] == "surrogate.json"]
    by_line = {r["_corrupt_record"]: r for r in rows}
    assert '{"order_id": "s1", "customer": "\\ud800"}' in by_line
    assert [r["customer"] for r in rows if r["_corrupt_record"] is None] == ["\U0001f600"]
    assert all("?" not in (r["customer"] or "") for r in rows)


def test_landed_lines_reconcile_with_bronze_and_silver(spark: SparkSession, home: Settings) -> None:
    for dataset, fmt in (("edges_json", "json"), ("edges_csv", "csv")):
        bronze, silver = list(orders_registry(dataset, fmt))
        result = reconcile_pipeline(spark, home, Pipeline(bronze, silver))
        assert not result.failed, [o.summary() for o in result.failed]


def test_a_key_sent_again_with_another_time_is_a_duplicate_in_any_batch(
    spark: SparkSession, fresh_settings: Settings
) -> None:
    folder = fresh_settings.landing / "resent"
    folder.mkdir(parents=True)
    registry = orders_registry("resent", "json")
    # Within one batch, and in a later batch: the first copy wins, whatever the copy's time and values.
    (folder / "a.json").write_text(
        _order("k1", "2026-01-03T10:00:00Z", 1.0) + "\n" + _order("k1", "2026-01-03T10:00:01Z", 2.0) + "\n"
    )
    for spec in registry:
        run_table(spark, fresh_settings, spec)
    (folder / "b.json").write_text(_order("k1", "2026-02-09T10:00:01Z", 3.0) + "\n" + _order("k2") + "\n")
    reports = [run_table(spark, fresh_settings, spec) for spec in registry]
    rows = table(spark, fresh_settings, "silver.resent").select("order_id", "price").collect()
    assert sorted((r.order_id, r.price) for r in rows) == [("k1", Decimal("1.00")), ("k2", Decimal("2.50"))]
    assert reports[1].metrics["duplicates_dropped"] == 1


def test_a_symbolic_link_in_landing_stops_the_run_naming_it(spark: SparkSession, fresh_settings: Settings) -> None:
    folder = fresh_settings.landing / "linked"
    folder.mkdir(parents=True)
    outside = fresh_settings.home.parent / "outside.json"
    outside.write_text(_order("x1") + "\n")
    os.symlink("/etc/passwd", folder / "passwd.json")
    bronze = next(iter(orders_registry("linked", "json")))
    with pytest.raises(PipelineError) as err:
        run_table(spark, fresh_settings, bronze)
    assert str(err.value) == (
        f"table bronze.linked: landing file {folder / 'passwd.json'} is a symbolic link (to /etc/passwd), which "
        "Tributary does not follow; copy the file into the landing folder under a new name and remove the link "
        "(nothing was written)"
    )
    (folder / "passwd.json").unlink()
    os.symlink(outside, folder / "outside.json")
    with pytest.raises(PipelineError, match=r"outside\.json is a symbolic link"):
        run_table(spark, fresh_settings, bronze)
    assert not (fresh_settings.checkpoint_for(bronze.name) / "commits").exists()


def test_files_in_a_subfolder_are_named_on_every_run(spark: SparkSession, fresh_settings: Settings) -> None:
    folder = fresh_settings.landing / "nested"
    (folder / "2026-01-03").mkdir(parents=True)
    (folder / "2026-01-03" / "a.json").write_text(_order("n1") + "\n")
    (folder / "empty-subfolder").mkdir()
    (folder / "b.json").write_text(_order("n2") + "\n")
    bronze = next(iter(orders_registry("nested", "json")))
    expected = (
        f"table bronze.nested: landing folder {folder} holds subfolder(s) 2026-01-03 whose files are not read "
        "(landing is not recursive); move those files into the landing folder itself"
    )
    first = run_table(spark, fresh_settings, bronze)
    again = run_table(spark, fresh_settings, bronze)
    assert (first.file_problems(), again.skipped, again.file_problems()) == ([expected], True, [expected])
    assert [r.order_id for r in table(spark, fresh_settings, "bronze.nested").collect()] == ["n2"]
