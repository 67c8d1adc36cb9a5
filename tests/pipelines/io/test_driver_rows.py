"""Rows the driver holds (per-file health) appended without a Spark job: one tagged commit per call, in both
formats, and writers racing on one Iceberg table all land; and small tables read back without one."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pyarrow as pa
from deltalake import DeltaTable

from infra.catalog import pyiceberg_catalog
from pipelines.io.delta import DeltaFormat
from pipelines.io.iceberg import IcebergFormat
from pipelines.io.iceberg_history import BATCH_PROPERTY, WRITER_PROPERTY
from tests.support.homes import make_settings

SCHEMA = pa.schema([("file", pa.string()), ("rows", pa.int64()), ("recorded_at", pa.timestamp("us", tz="UTC"))])
NOW = datetime(2026, 11, 28, 8, 0, tzinfo=UTC)


def _iceberg_files_table(tmp_path, name: str):
    """A new Iceberg table of `SCHEMA` in a fresh home: (its format, the pyiceberg catalog)."""
    settings = make_settings(tmp_path)
    catalog = pyiceberg_catalog(settings)
    catalog.create_namespace_if_not_exists("bronze")
    catalog.create_table(name, schema=SCHEMA)
    return IcebergFormat(settings), catalog


def _delta_files_table(tmp_path, name: str):
    """A new Delta table of `SCHEMA` in a fresh home: (its format, its folder)."""
    fmt = DeltaFormat(make_settings(tmp_path))
    path = fmt.location(name)
    path.mkdir(parents=True)
    DeltaTable.create(str(path), schema=SCHEMA)
    return fmt, path


def test_iceberg_rows_commit_once_per_call_tagged_with_writer_and_batch(tmp_path):
    fmt, catalog = _iceberg_files_table(tmp_path, "bronze.t_files")
    assert fmt.append_rows("bronze.t_files", [{"file": "a", "rows": 3, "recorded_at": NOW}], "w1", 0) == 1
    assert fmt.append_rows("bronze.t_files", [{"file": "b", "rows": None, "recorded_at": NOW}] * 2, "w1", 1) == 2
    table = catalog.load_table("bronze.t_files")
    summaries = [s.summary.additional_properties for s in table.snapshots()]
    assert [(s[WRITER_PROPERTY], s[BATCH_PROPERTY], s["added-records"]) for s in summaries] == [
        ("w1", "0", "1"),
        ("w1", "1", "2"),
    ]
    assert sorted(table.scan().to_arrow().to_pylist(), key=str) == sorted(
        [{"file": "a", "rows": 3, "recorded_at": NOW}, *[{"file": "b", "rows": None, "recorded_at": NOW}] * 2], key=str
    )


def test_iceberg_writers_racing_on_one_table_all_land(tmp_path):
    """A commit that loses the catalog's compare-and-swap is tried again (by pyiceberg): every writer lands."""
    (fmt, catalog), start, errors = _iceberg_files_table(tmp_path, "bronze.race_files"), threading.Barrier(3), []

    def write(batch: int) -> None:
        start.wait()
        try:
            fmt.append_rows("bronze.race_files", [{"file": str(batch), "rows": batch, "recorded_at": NOW}], "w", batch)
        except Exception as exc:  # reported below: a thread's exception would otherwise be lost
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(b,)) for b in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    table = catalog.load_table("bronze.race_files")
    assert sorted(r["rows"] for r in table.scan().to_arrow().to_pylist()) == [0, 1, 2]
    assert sorted(s.summary.additional_properties[BATCH_PROPERTY] for s in table.snapshots()) == ["0", "1", "2"]


def test_delta_rows_commit_one_version_with_the_batch_as_app_transaction(tmp_path):
    fmt, path = _delta_files_table(tmp_path, "bronze.t_files")
    assert fmt.append_rows("bronze.t_files", [{"file": "a", "rows": 3, "recorded_at": NOW}], "w1", 4) == 1
    assert fmt.committed_batches(None, "bronze.t_files", "w1", 4) == {4}  # type: ignore[arg-type]
    table = DeltaTable(str(path))
    assert table.version() == 1
    assert pa.table(table.to_pyarrow_table()).to_pylist() == [{"file": "a", "rows": 3, "recorded_at": NOW}]
    assert not any((path / "_staging").rglob("*.parquet"))  # the written file moved into the table


def test_iceberg_rows_read_back_as_of_the_current_snapshot_with_deletes_applied(tmp_path):
    fmt, catalog = _iceberg_files_table(tmp_path, "bronze.r_files")
    fmt.append_rows("bronze.r_files", [{"file": "a", "rows": 3, "recorded_at": NOW}], "w1", 0)
    fmt.append_rows("bronze.r_files", [{"file": "b", "rows": 5, "recorded_at": NOW}], "w1", 1)
    assert sorted(fmt.read_rows("bronze.r_files", ("rows", "file")), key=str) == [
        {"rows": 3, "file": "a"},
        {"rows": 5, "file": "b"},
    ]
    catalog.load_table("bronze.r_files").delete("file = 'a'")
    assert fmt.read_rows("bronze.r_files", ("file",)) == [{"file": "b"}]


def test_delta_rows_read_back_from_the_current_version(tmp_path):
    fmt, _ = _delta_files_table(tmp_path, "bronze.r_files")
    fmt.append_rows("bronze.r_files", [{"file": "a", "rows": 3, "recorded_at": NOW}], "w1", 0)
    fmt.append_rows("bronze.r_files", [{"file": "b", "rows": None, "recorded_at": NOW}], "w1", 1)
    assert sorted(fmt.read_rows("bronze.r_files", ("file", "rows")), key=str) == [
        {"file": "a", "rows": 3},
        {"file": "b", "rows": None},
    ]


def test_rows_read_among_values_and_appended_with_properties_in_both_formats(tmp_path):
    iceberg, catalog = _iceberg_files_table(tmp_path / "i", "bronze.q_files")
    delta, path = _delta_files_table(tmp_path / "d", "bronze.q_files")
    rows = [{"file": name, "rows": n, "recorded_at": NOW} for name, n in (("a", 1), ("b", 2), ("c", 3))]
    for fmt in (iceberg, delta):
        assert fmt.append_rows("bronze.q_files", rows, "w1", 0, {"tributary.rows-read": "3"}) == 3
        # A batch whose rows were all there already still commits, with its properties.
        assert fmt.append_rows("bronze.q_files", [], "w1", 1, {"tributary.rows-read": "2"}) == 0
        among = fmt.read_rows("bronze.q_files", ("file", "rows"), ("file", ["c", "a", "z"]))
        assert sorted(among, key=str) == [{"file": "a", "rows": 1}, {"file": "c", "rows": 3}], type(fmt).__name__
        assert len(fmt.read_rows("bronze.q_files", ("file",))) == 3
    summary = catalog.load_table("bronze.q_files").current_snapshot().summary
    assert (summary["tributary.rows-read"], summary[BATCH_PROPERTY]) == ("2", "1")
    last = DeltaTable(str(path)).history(1)[0]
    assert (last["tributary.rows-read"], DeltaTable(str(path)).version()) == ("2", 2)
