"""`tributary infer` (schema code from landed files, real Spark) and `tributary run --with-upstream` (the chain)."""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    ArrayType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from infra.errors import ConfigError
from infra.settings import Settings
from orchestration.cli.main import build_parser, main
from pipelines.authoring.load import load_registry
from pipelines.datasets import default_registry
from pipelines.ops.infer.code import schema_code
from pipelines.ops.infer.sample import InferError, spread_sample
from pipelines.ops.infer.schema import InferredSchema, infer_schema
from pipelines.run.pipeline import select_specs, with_upstream
from tests.support.packages import write_package


def _schema_of(code: str) -> StructType:
    """Run printed schema code as a user pasting it would, and return its SCHEMA."""
    namespace: dict[str, object] = {}
    exec(code, namespace)
    schema = namespace["SCHEMA"]
    assert isinstance(schema, StructType)
    return schema


def _write_lines(path: Path, lines: list[str]) -> None:
    data = "".join(f"{line}\n" for line in lines).encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)


def _cli_env(monkeypatch: pytest.MonkeyPatch, settings: Settings) -> None:
    """Make `main(['--home', ...])` build the same settings (catalog included) as the shared SparkSession has."""
    monkeypatch.setenv("TRIBUTARY_CATALOG_NAME", settings.catalog_name)
    for name in ("LANDING", "WAREHOUSE", "CHECKPOINTS", "CATALOG_DB", "CATALOG_URI"):
        monkeypatch.delenv(f"TRIBUTARY_{name}", raising=False)


# ------------------------------------------------------------------------------------------------ infer


def test_infer_json_lines_through_the_cli(
    fresh_settings: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """JSON lines (one corrupt, one gzipped file, in-flight files ignored): printed code rebuilds the schema."""
    folder = fresh_settings.landing / "orders_feed"
    folder.mkdir(parents=True)
    records = [
        {"order_id": "o-1", "ordered_at": "2026-01-05T10:00:00Z", "quantity": 3, "amount": 12.50, "User ID": "u1"},
        {"order_id": "o-2", "ordered_at": "2026-01-05T11:30:00Z", "quantity": 1, "amount": 1234.99, "User ID": "u2"},
        {"order_id": "o-3", "ordered_at": "2026-01-06T09:15:00Z", "quantity": 7, "amount": 5.25, "User ID": None},
    ]
    lines = [json.dumps(r) for r in records]
    _write_lines(folder / "part-0001.json", [*lines[:2], "", "{not json", lines[2]])
    gz_line = '{"order_id": "o-4", "ordered_at": "2026-01-07T08:00:00Z", "quantity": 2, "amount": 9.99, "coupon": 5}'
    _write_lines(folder / "part-0002.json.gz", [gz_line])
    _write_lines(folder / ".part-0003.json", ['{"in_flight": "never read"}'])  # not landed yet
    (folder / "_SUCCESS").write_text("")
    _cli_env(monkeypatch, fresh_settings)

    assert main(["--home", str(fresh_settings.home), "infer", "orders_feed"]) == 0
    out = capsys.readouterr().out

    assert _schema_of(out) == StructType(
        [
            # first-seen order (Spark's JSON inference would sort the fields alphabetically)
            StructField("order_id", StringType()),
            StructField("ordered_at", TimestampType()),
            StructField("quantity", LongType()),
            StructField("amount", DecimalType(18, 2)),  # every value has at most 2 places: exact
            StructField("User ID", StringType()),
            StructField("coupon", LongType()),  # only in the gzipped file
        ]
    )
    assert "# 1 of 5 sampled lines were not valid JSON" in out  # the blank line is not a record
    assert "from 2 of 2 files" in out  # the dot-file and _SUCCESS are not landed files
    assert 'StructField("User ID", StringType()),  # rename: user_id' in out
    amount = next(line for line in out.splitlines() if '"amount"' in line)
    assert "at most 2 decimal places: double if approximate will do" in amount
    assert out.rstrip().endswith('tb.landing("bronze.orders_feed", tb.files("orders_feed", "json", SCHEMA))')


def test_infer_csv_keeps_the_header_order(spark: SparkSession, fresh_settings: Settings) -> None:
    """CSV columns print in header order (not alphabetical), types by Spark's CSV inference; gz read too."""
    folder = fresh_settings.landing / "catalog_feed"
    folder.mkdir(parents=True)
    header = "sku,price,category,Added At,stock,launch_day"
    _write_lines(
        folder / "2026-01-05.csv",
        [header, "p1,12.50,toys,2026-01-05 10:00:00,3,2026-01-05", "p2,3.10,books,2026-01-05 11:00:00,40,2026-01-06"],
    )
    _write_lines(folder / "2026-01-06.csv.gz", [header, "p3,7.00,toys,2026-01-06 09:00:00,5,2026-01-07", "p4,1.00"])

    inferred = infer_schema(spark, folder, None, 20, 1000, scratch=fresh_settings.home)
    code = schema_code(inferred)

    expected = StructType(
        [
            StructField("sku", StringType()),
            StructField("price", DecimalType(18, 2)),
            StructField("category", StringType()),
            StructField("Added At", TimestampType()),
            StructField("stock", IntegerType()),
            StructField("launch_day", DateType()),
        ]
    )
    assert inferred.format == "csv"
    assert inferred.schema == expected
    assert _schema_of(code) == expected
    assert (inferred.rows_sampled, inferred.corrupt_rows) == (4, 1)  # "p4,1.00" has 2 of 6 cells
    assert "# 1 of 4 sampled rows were not valid CSV" in code
    assert "# rename: added_at" in code
    assert code.rstrip().endswith('tb.landing("bronze.catalog_feed", tb.files("catalog_feed", "csv", SCHEMA))')
    # Pasted as a dataset module, it loads: its bronze table reads the folder with the inferred columns.
    package = write_package(fresh_settings.home / "packages", "pasted_catalog", {"tables.py": code})
    spec = load_registry([package]).get("bronze.catalog_feed")
    assert spec.source.landing_folder_name() == "catalog_feed"
    assert spec.output.schema.names[: len(expected.names)] == expected.names


def test_infer_prints_tb_schema_text_and_keeps_double_for_inexact_numbers(
    spark: SparkSession, fresh_settings: Settings
) -> None:
    """Columns `tb.schema` can say print as its text, as the docs teach; a number with an exponent or more than 4
    places stays double, while prices with at most 2 places are exact decimals wide enough for larger ones."""
    folder = fresh_settings.landing / "trades"
    folder.mkdir(parents=True)
    lines = [  # as a producer wrote them (json.dumps would print 1.5e3 as 1500.0)
        '{"trade_id": "t1", "price": 10.25, "rate": 0.123456, "size": 1.5e3, "qty": 3, "day": "2026-01-05"}',
        '{"trade_id": "t2", "price": 7.1, "rate": 1.5, "size": 2.0, "qty": 4, "day": "2026-01-06"}',
    ]
    _write_lines(folder / "1.json", lines)

    code = schema_code(infer_schema(spark, folder, None, 20, 100, scratch=fresh_settings.home))

    assert "StructType" not in code and "pyspark" not in code
    assert "SCHEMA = tb.schema(" in code
    assert _schema_of(code) == StructType(
        [
            StructField("trade_id", StringType()),
            StructField("price", DecimalType(18, 2)),
            StructField("rate", DoubleType()),  # 6 places: not an amount
            StructField("size", DoubleType()),  # exponent notation
            StructField("qty", LongType()),
            StructField("day", DateType()),
        ]
    )
    price = next(line for line in code.splitlines() if '"price ' in line)
    assert price.startswith('    "price decimal(18,2), "  # every sampled value has at most 2 decimal places'), price
    package = write_package(fresh_settings.home / "packages", "pasted_trades", {"tables.py": code})
    assert load_registry([package]).get("bronze.trades").source.landing_folder_name() == "trades"


def test_infer_csv_merges_headers_in_first_seen_order(spark: SparkSession, fresh_settings: Settings) -> None:
    """Files with other headers: every column once, first-seen order, a comment on columns some files lack."""
    folder = fresh_settings.landing / "layouts"
    folder.mkdir(parents=True)
    _write_lines(folder / "a.csv", ["zeta,alpha", "z1,1"])
    _write_lines(folder / "b.csv", ["alpha,mid,zeta", "2,2026-01-05,z2"])

    inferred = infer_schema(spark, folder, "csv", 20, 100)

    assert inferred.schema.names == ["zeta", "alpha", "mid"]
    assert inferred.schema["alpha"].dataType == IntegerType()
    assert inferred.schema["mid"].dataType == DateType()
    mid = next(line for line in schema_code(inferred).splitlines() if '"mid ' in line)  # tb.schema text
    assert "1 of 2 sampled files lack it" in mid


def test_infer_samples_rows_and_files_spread_over_the_folder(spark: SparkSession, fresh_settings: Settings) -> None:
    """The row budget is shared by the sampled files; sampled files include the first and the last."""
    folder = fresh_settings.landing / "spread"
    folder.mkdir(parents=True)
    for i in range(1, 4):
        _write_lines(folder / f"f{i}.json", [json.dumps({"id": n, f"only_in_{i}": "x"}) for n in range(10)])
    assert spread_sample(sorted(folder.iterdir()), 2) == [folder / "f1.json", folder / "f3.json"]

    every_file = infer_schema(spark, folder, None, sample_files=3, sample_rows=3)
    assert every_file.rows_sampled == 3
    assert every_file.schema.names == ["id", "only_in_1", "only_in_2", "only_in_3"]

    two_files = infer_schema(spark, folder, None, sample_files=2, sample_rows=4)
    assert (two_files.rows_sampled, two_files.files_total) == (4, 3)
    assert two_files.schema.names == ["id", "only_in_1", "only_in_3"]


def test_infer_parquet_reads_the_footers(spark: SparkSession, fresh_settings: Settings) -> None:
    folder = fresh_settings.landing / "parquet_feed"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"b_id": pa.array([1], pa.int32()), "a_amount": pa.array([1.5])}), folder / "1.parquet")
    inferred = infer_schema(spark, folder, None, 20, 10)
    assert inferred.schema == StructType([StructField("b_id", IntegerType()), StructField("a_amount", DoubleType())])
    assert _schema_of(schema_code(inferred)) == inferred.schema


def test_schema_code_round_trips_any_type() -> None:
    """Nested, map, decimal, non-nullable and quoted names all survive printing and exec."""
    schema = StructType(
        [
            StructField('say "hi"', StringType(), False),
            StructField("price", DecimalType(12, 2)),
            StructField("tags", ArrayType(StringType(), False)),
            StructField("attrs", MapType(StringType(), LongType())),
            StructField("item", StructType([StructField("Sub Name", StringType())])),
        ]
    )
    inferred = InferredSchema("odd", Path("/landing/odd"), "json", schema, 1, (Path("/landing/odd/1.json"),), 1)
    code = schema_code(inferred)
    assert _schema_of(code) == schema
    assert "# rename: say_hi" in code
    assert "# rename nested: item.Sub Name -> sub_name" in code


@pytest.mark.parametrize(
    ("files", "dataset", "message"),
    [
        ({}, "missing_feed", "does not exist"),
        ({".in-flight.json": "{}", "_SUCCESS": ""}, "empty_feed", "has no landed files"),
        ({"a.json": "{}", "b.csv": "x\n1"}, "mixed_feed", "mixes formats: 1 csv (e.g. b.csv), 1 json (e.g. a.json)"),
        ({"a.txt": "x"}, "unknown_feed", "cannot tell the format of landing file"),
        ({"a.json": gzip.compress(b"{}")}, "gzip_feed", "holds gzip data but its name does not end in .gz"),
    ],
)
def test_infer_errors_are_one_line_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    files: dict[str, str | bytes],
    dataset: str,
    message: str,
) -> None:
    """A missing, empty, mixed or misnamed landing folder fails before Spark starts, naming the folder or file."""
    monkeypatch.delenv("TRIBUTARY_LANDING", raising=False)
    home = tmp_path / "home"
    folder = home / "landing" / dataset
    if files:
        folder.mkdir(parents=True)
        for name, content in files.items():
            path = folder / name
            path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)

    assert main(["--home", str(home), "infer", dataset]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("tributary: error: ")
    assert message in lines[0]
    assert str(folder) in lines[0]


def test_infer_refuses_a_sample_without_records(spark: SparkSession, fresh_settings: Settings) -> None:
    folder = fresh_settings.landing / "blank_feed"
    folder.mkdir(parents=True)
    _write_lines(folder / "1.json", ["", "   "])
    with pytest.raises(InferError, match="hold no records"):
        infer_schema(spark, folder, None, 20, 10)
    _write_lines(folder / "1.json", ["not json", "[1, 2]"])
    with pytest.raises(InferError, match="none of the 2 sampled records"):
        infer_schema(spark, folder, None, 20, 10)


# ------------------------------------------------------------------------------------------- with-upstream


def test_with_upstream_follows_the_registry() -> None:
    registry = default_registry()
    assert with_upstream(registry, ["gold.daily_revenue"]) == ["bronze.events", "silver.events", "gold.daily_revenue"]
    # a stream-static join pulls its reference side (silver.products) too
    assert with_upstream(registry, ["silver.impressions"]) == [
        "bronze.impressions",
        "silver.products",
        "silver.impressions",
    ]
    # transitively, through a secondary stream, each table once, in registry order
    assert with_upstream(registry, ["gold.clicks_by_category", "gold.ad_clicks", "silver.impressions"]) == [
        "bronze.impressions",
        "bronze.clicks",
        "silver.products",
        "silver.impressions",
        "gold.ad_clicks",
        "gold.clicks_by_category",
    ]
    assert with_upstream(registry, ["bronze.events"]) == ["bronze.events"]
    with pytest.raises(ConfigError, match=r"no table 'gold\.nope'"):
        with_upstream(registry, ["gold.nope"])


def test_run_with_upstream_flag_selects_the_chain() -> None:
    registry = default_registry()
    parser, handlers = build_parser()
    flagged = parser.parse_args(["run", "--with-upstream", "gold.daily_revenue"])
    plain = parser.parse_args(["run", "gold.daily_revenue"])
    assert (flagged.with_upstream, plain.with_upstream) == (True, False)
    assert handlers["infer"] is not None

    def names(args: argparse.Namespace) -> list[str]:
        return [s.name for s in select_specs(registry, args.tables, include_upstream=args.with_upstream)]

    assert names(flagged) == ["bronze.events", "silver.events", "gold.daily_revenue"]
    assert names(plain) == ["gold.daily_revenue"]  # unchanged without the flag
    assert [s.name for s in select_specs(registry, None, include_upstream=True)] == [s.name for s in registry]
