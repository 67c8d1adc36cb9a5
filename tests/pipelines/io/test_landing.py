"""A user's own files land safely: values under the right column, nothing dropped, every file accounted for.

One CSV and one JSON dataset each land a set of awkward files at once; every case then asserts its exact
outcome (bronze values, rescued data, silver rows, quarantine reasons, the file's recorded health), and every
landed line is reconciled: landed lines = bronze rows per file = silver + quarantine + duplicates.
"""

from __future__ import annotations

import gzip
import json
import shutil
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from infra.errors import PipelineError
from infra.settings import Settings
from pipelines.run.runner import run_table
from pipelines.sources.report import RunReport
from pipelines.spec.registry import Registry
from quality.reconcile import Pipeline, reconcile_pipeline
from tests.support.helpers import land_files, table
from tests.support.homes import make_settings
from tests.support.landing_registry import orders_registry

HEADER = "order_id,quantity,price,ordered_at,customer"
CSV_FILES: dict[str, bytes] = {
    "01_reordered.csv": b"customer,order_id,ordered_at,price,quantity\n"
    b"alice,r1,2026-01-01 10:00:00,9.50,2\nbob,r2,2026-01-01 11:00:00,1.25,3\n",
    "02_extra_column.csv": f"{HEADER},coupon\ne1,1,3.00,2026-01-01 12:00:00,erin,SAVE5\n".encode(),
    "03_missing_column.csv": b"order_id,quantity,ordered_at,customer\n"
    b"m1,1,2026-01-01 13:00:00,mo\nm2,2,2026-01-01 13:30:00,max\n",
    "04_index_column.csv": f",{HEADER}\n0,i1,4,2.50,2026-01-01 14:00:00,ivy\n".encode(),
    "05_float_ints.csv": f"{HEADER}\nf1,517.0,1.00,2026-01-01 15:00:00,fay\n"
    "f2,2.0,1.00,2026-01-01 15:01:00,fox\n".encode(),
    "06_header_only.csv": f"{HEADER}\n".encode(),
    "07_empty.csv": b"",
    "08_bom_crlf.csv": f"\ufeff{HEADER}\r\nb1,1,2.00,2026-01-02 00:00:00,carol\r\n".encode(),
    "09_latin1.csv": f"{HEADER}\nl1,1,1.00,2026-01-02 01:00:00,lea\n".encode()
    + b"l2,1,1.00,2026-01-02 01:01:00,Jos\xe9\n"
    + b"l3,1,1.00,2026-01-02 01:02:00,lou\n",
    "11_short_row.csv": f"{HEADER}\ns1,1,1.00,2026-01-02 02:00:00,sam\ns2,1\n"
    "s3,1,1.00,2026-01-02 02:02:00,sue\n".encode(),
}
GZ_NAME, GZ_ROWS = "10_rows.csv.gz", f"{HEADER}\ng1,7,7.00,2026-01-02 03:00:00,gus\n".encode()


def _json(order_id: str, **extra: object) -> str:
    record = {"order_id": order_id, "quantity": 1, "price": 2.5, "ordered_at": "2026-01-03T10:00:00Z", "customer": "c"}
    record.update(extra)
    return json.dumps(record)


JSON_FILES: dict[str, str] = {
    "01_new_field.json": _json("n1", coupon="X", meta={"a": [1, 2]}) + "\n" + _json("n2") + "\n",
    "02_wrong_type.json": "\n".join([_json("w1"), _json("w2", quantity="three"), _json("w3")]) + "\n",
    "03_array.json": json.dumps([json.loads(_json("a1")), json.loads(_json("a2"))]) + "\n",
    "04_key_order.json": '{"customer": "kim", "price": 3.5, "quantity": 5, "order_id": "k1", '
    '"ordered_at": "2026-01-03T11:00:00Z"}\n',
}


def _run_all(spark: SparkSession, settings: Settings, registry: Registry) -> list[RunReport]:
    return [run_table(spark, settings, spec) for spec in registry]


def _files(spark: SparkSession, settings: Settings, name: str) -> dict[str, dict]:
    return {Path(r["file"]).name: r.asDict() for r in table(spark, settings, f"{name}_files").collect()}


def _reconciled(spark: SparkSession, settings: Settings, registry: Registry) -> None:
    bronze, silver = list(registry)
    result = reconcile_pipeline(spark, settings, Pipeline(bronze, silver))
    assert not result.failed, [o.summary() for o in result.failed]


REPORTS: dict[str, RunReport] = {}


@pytest.fixture(scope="module")
def home(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """One home for the CSV and JSON datasets, each landed and run once (bronze, then silver).

    Every bronze batch is staged (write-audit-publish, the default, set here whatever the environment says):
    batches holding a rejected file fall back to the checked path, the others are published from the stage.
    """
    settings = replace(make_settings(tmp_path_factory.mktemp("landing")), stage_landing_mb=0)
    land_files(settings.landing / "orders_csv", CSV_FILES)
    with gzip.open(settings.landing / "orders_csv" / GZ_NAME, "wb") as fh:
        fh.write(GZ_ROWS)
    land_files(settings.landing / "orders_json", {k: v.encode() for k, v in JSON_FILES.items()})
    for registry in (CSV, JSONL):
        for report in _run_all(spark, settings, registry):
            REPORTS[report.table] = report
    return settings


CSV = orders_registry("orders_csv", "csv")
JSONL = orders_registry("orders_json", "json")


def _bronze(spark: SparkSession, settings: Settings, name: str) -> dict[str, dict]:
    rows = table(spark, settings, f"bronze.{name}").filter(F.col("order_id").isNotNull()).collect()
    return {r["order_id"]: r.asDict() for r in rows}


def _silver_ids(spark: SparkSession, settings: Settings, name: str) -> set[str]:
    return {r.order_id for r in table(spark, settings, f"silver.{name}").select("order_id").collect()}


def _quarantine(spark: SparkSession, settings: Settings, name: str) -> dict[str, list[str]]:
    rows = table(spark, settings, f"silver.{name}_quarantine").collect()
    return {(r.order_id or r.raw_record): sorted(r.reasons) for r in rows}


def test_csv_columns_are_matched_by_header_name(spark: SparkSession, home: Settings) -> None:
    bronze = _bronze(spark, home, "orders_csv")
    assert (bronze["r1"]["customer"], bronze["r1"]["quantity"], bronze["r1"]["price"]) == ("alice", 2, Decimal("9.50"))
    assert (bronze["r2"]["customer"], bronze["r2"]["quantity"], bronze["r2"]["price"]) == ("bob", 3, Decimal("1.25"))
    assert bronze["r1"]["_rescued_data"] is None and bronze["r1"]["_corrupt_record"] is None
    assert {"r1", "r2"} <= _silver_ids(spark, home, "orders_csv")


def test_csv_extra_column_is_rescued_not_dropped(spark: SparkSession, home: Settings) -> None:
    row = _bronze(spark, home, "orders_csv")["e1"]
    assert json.loads(row["_rescued_data"]) == {"coupon": "SAVE5"}
    assert (row["customer"], row["quantity"]) == ("erin", 1)
    assert "e1" in _silver_ids(spark, home, "orders_csv")
    assert _files(spark, home, "bronze.orders_csv")["02_extra_column.csv"]["rescued_rows"] == 1


def test_csv_missing_column_rejects_the_file_by_name(spark: SparkSession, home: Settings) -> None:
    health = _files(spark, home, "bronze.orders_csv")["03_missing_column.csv"]
    assert health["status"] == "rejected" and "lacks column(s) price" in health["reason"]
    quarantine = _quarantine(spark, home, "orders_csv")
    assert quarantine["m1"] == ["file_rejected"] and quarantine["m2"] == ["file_rejected"]
    assert not {"m1", "m2"} & _silver_ids(spark, home, "orders_csv")


def test_csv_leading_index_column_is_rescued(spark: SparkSession, home: Settings) -> None:
    row = _bronze(spark, home, "orders_csv")["i1"]
    assert (row["quantity"], row["price"], row["customer"]) == (4, Decimal("2.50"), "ivy")
    assert json.loads(row["_rescued_data"]) == {"_c0": "0"}
    assert "i1" in _silver_ids(spark, home, "orders_csv")


def test_integers_written_as_floats_reject_the_file(spark: SparkSession, home: Settings) -> None:
    bronze = _bronze(spark, home, "orders_csv")
    assert bronze["f1"]["quantity"] is None and json.loads(bronze["f1"]["_rescued_data"]) == {"quantity": "517.0"}
    assert bronze["f1"]["_corrupt_record"] == "f1,517.0,1.00,2026-01-01 15:00:00,fay"
    health = _files(spark, home, "bronze.orders_csv")["05_float_ints.csv"]
    assert (health["status"], health["rows"], health["corrupt_rows"]) == ("rejected", 2, 2)
    assert "2 of 2 rows are corrupt" in health["reason"]
    assert _quarantine(spark, home, "orders_csv")["f1"] == ["file_rejected", "well_formed"]


def test_header_only_and_empty_files_are_named(spark: SparkSession, home: Settings) -> None:
    files = _files(spark, home, "bronze.orders_csv")
    assert (files["06_header_only.csv"]["status"], files["06_header_only.csv"]["rows"]) == ("header_only", 0)
    assert (files["07_empty.csv"]["status"], files["07_empty.csv"]["rows"]) == ("empty", 0)


def test_bom_and_crlf_do_not_leak_into_values(spark: SparkSession, home: Settings) -> None:
    row = _bronze(spark, home, "orders_csv")["b1"]
    assert (row["customer"], row["quantity"], row["_corrupt_record"], row["_rescued_data"]) == ("carol", 1, None, None)


def test_non_utf8_line_is_one_corrupt_record(spark: SparkSession, home: Settings) -> None:
    bronze = _bronze(spark, home, "orders_csv")
    assert bronze["l2"]["_corrupt_record"] == "l2,1,1.00,2026-01-02 01:01:00,Jos\ufffd"
    assert _files(spark, home, "bronze.orders_csv")["09_latin1.csv"]["status"] == "ok"  # 1 of 3 corrupt
    assert _quarantine(spark, home, "orders_csv")["l2"] == ["well_formed"]
    assert {"l1", "l3"} <= _silver_ids(spark, home, "orders_csv")


def test_gzip_and_short_rows(spark: SparkSession, home: Settings) -> None:
    bronze = _bronze(spark, home, "orders_csv")
    assert (bronze["g1"]["quantity"], bronze["g1"]["customer"]) == (7, "gus")
    assert bronze["s2"]["_corrupt_record"] == "s2,1"
    assert _quarantine(spark, home, "orders_csv")["s2"] == ["well_formed"]


def test_csv_every_line_is_accounted_for(spark: SparkSession, home: Settings) -> None:
    assert _silver_ids(spark, home, "orders_csv") == {"r1", "r2", "e1", "i1", "b1", "l1", "l3", "g1", "s1", "s3"}
    assert set(_quarantine(spark, home, "orders_csv")) == {"m1", "m2", "f1", "f2", "l2", "s2"}
    assert len(_files(spark, home, "bronze.orders_csv")) == len(CSV_FILES) + 1
    _reconciled(spark, home, CSV)
    # Spark's CSV reader read the plain files; the line parse the others (not UTF-8, gzip, empty, a bad header).
    assert REPORTS["bronze.orders_csv"].metrics["files_read_by_csv_reader"] == 7
    # Rows in are the landed records of every file, however read (header lines are not records).
    assert REPORTS["bronze.orders_csv"].rows_in == table(spark, home, "bronze.orders_csv").count() == 16


def test_json_new_field_is_rescued(spark: SparkSession, home: Settings) -> None:
    row = _bronze(spark, home, "orders_json")["n1"]
    assert json.loads(row["_rescued_data"]) == {"coupon": "X", "meta": '{"a":[1,2]}'}
    assert row["_corrupt_record"] is None and "n1" in _silver_ids(spark, home, "orders_json")


def test_json_wrong_type_keeps_the_original_text(spark: SparkSession, home: Settings) -> None:
    row = _bronze(spark, home, "orders_json")["w2"]
    assert row["quantity"] is None and json.loads(row["_rescued_data"]) == {"quantity": "three"}
    assert json.loads(row["_corrupt_record"])["quantity"] == "three"
    assert _quarantine(spark, home, "orders_json")["w2"] == ["well_formed"]
    assert {"w1", "w3"} <= _silver_ids(spark, home, "orders_json")


def test_json_array_file_is_rejected(spark: SparkSession, home: Settings) -> None:
    health = _files(spark, home, "bronze.orders_json")["03_array.json"]
    assert (health["status"], health["rows"], health["corrupt_rows"]) == ("rejected", 1, 1)
    line = JSON_FILES["03_array.json"].strip()
    assert _quarantine(spark, home, "orders_json")[line] == ["file_rejected", "order_id_present", "well_formed"]


def test_json_fields_are_matched_by_name(spark: SparkSession, home: Settings) -> None:
    row = _bronze(spark, home, "orders_json")["k1"]
    assert (row["customer"], row["price"], row["quantity"]) == ("kim", Decimal("3.50"), 5)
    _reconciled(spark, home, JSONL)
    # Spark's JSON reader read the files of plain objects (a value that does not convert included); the line parse
    # the others (an undeclared key, an array).
    assert REPORTS["bronze.orders_json"].metrics["files_read_by_json_reader"] == 2
    # The staged batches' file health was observed while they were written, never read back from them.
    assert REPORTS["bronze.orders_json"].metrics.get("file_health_read_back", 0) == 0


def test_resent_file_counts_duplicates_not_new_quarantine(spark: SparkSession, home: Settings) -> None:
    folder = home.landing / "orders_json"
    silver_before = _silver_ids(spark, home, "orders_json")
    quarantine_before = table(spark, home, "silver.orders_json_quarantine").count()
    shutil.copyfile(folder / "02_wrong_type.json", folder / "05_resent.json")
    reports = _run_all(spark, home, JSONL)
    assert "batch.publish" in reports[0].stages  # a batch of healthy files: staged, audited, published
    assert reports[1].metrics.get("duplicates_dropped") == 3  # w1, w3 valid; w2 already quarantined
    assert reports[1].metrics.get("rows_quarantined", 0) == 0
    assert _silver_ids(spark, home, "orders_json") == silver_before
    assert table(spark, home, "silver.orders_json_quarantine").count() == quarantine_before
    _reconciled(spark, home, JSONL)


def test_parquet_columns_are_matched_by_name(spark: SparkSession, fresh_settings: Settings) -> None:
    registry = orders_registry("orders_pq", "parquet")
    folder = fresh_settings.landing / "orders_pq"
    folder.mkdir(parents=True)
    data = pa.table(
        {
            "customer": ["pat"],
            "quantity": pa.array([6], pa.int32()),
            "order_id": ["p1"],
            "ordered_at": pa.array([1767261600000000], pa.timestamp("us", tz="UTC")),
            "price": pa.array([Decimal("4.25")], pa.decimal128(10, 2)),
        }
    )
    pq.write_table(data, folder / "p.parquet")
    run_table(spark, fresh_settings, next(iter(registry)))
    row = _bronze(spark, fresh_settings, "orders_pq")["p1"]
    assert (row["customer"], row["quantity"], row["price"]) == ("pat", 6, Decimal("4.25"))


def test_add_new_columns_mode_evolves_bronze(spark: SparkSession, fresh_settings: Settings) -> None:
    registry = orders_registry("orders_evolve", "json", evolution="add_new_columns")
    bronze = next(iter(registry))
    folder = fresh_settings.landing / "orders_evolve"
    land_files(folder, {"1.json": (_json("v1", coupon="X") + "\n" + _json("v2")).encode()})
    run_table(spark, fresh_settings, bronze)
    land_files(folder, {"2.json": (_json("v3", channel="web", coupon="Y") + "\n").encode()})
    run_table(spark, fresh_settings, bronze)
    rows = {r.order_id: r for r in table(spark, fresh_settings, bronze.name).collect()}
    assert (rows["v1"]["coupon"], rows["v2"]["coupon"], rows["v3"]["coupon"]) == ("X", None, "Y")
    assert (rows["v1"]["channel"], rows["v3"]["channel"]) == (None, "web")
    assert all(r["_rescued_data"] is None for r in rows.values())
    assert run_table(spark, fresh_settings, list(registry)[1]).metrics["rows_written:silver.orders_evolve"] == 3


def test_fail_mode_stops_before_writing(spark: SparkSession, fresh_settings: Settings) -> None:
    bronze = next(iter(orders_registry("orders_strict", "json", evolution="fail")))
    land_files(
        fresh_settings.landing / "orders_strict", {"1.json": (_json("x1") + "\n" + _json("x2", coupon="Z")).encode()}
    )
    with pytest.raises(PipelineError) as failed:
        run_table(spark, fresh_settings, bronze)
    message = str(failed.value)
    assert "1.json" in message and "coupon" in message and "schema_evolution" in message
    assert "\n" not in message
    assert table(spark, fresh_settings, bronze.name).count() == 0
    assert table(spark, fresh_settings, f"{bronze.name}_files").count() == 0


def test_missing_landing_folder_means_nothing_landed(spark: SparkSession, fresh_settings: Settings) -> None:
    registry = orders_registry("orders_never", "json")
    reports = _run_all(spark, fresh_settings, registry)
    assert reports[0].note is not None and "nothing has landed yet" in reports[0].note
    assert [r.rows_in for r in reports] == [0, 0]
    assert table(spark, fresh_settings, "silver.orders_never").count() == 0


def test_missing_upstream_is_named_with_the_command(spark: SparkSession, fresh_settings: Settings) -> None:
    silver = list(orders_registry("orders_later", "json"))[1]
    with pytest.raises(PipelineError) as failed:
        run_table(spark, fresh_settings, silver)
    assert str(failed.value) == (
        "table silver.orders_later: its upstream bronze.orders_later does not exist yet; create it first with "
        "'tributary run bronze.orders_later', or run 'tributary run --with-upstream silver.orders_later'"
    )
