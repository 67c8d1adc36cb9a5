"""A generated wide CSV dataset: 16 typed columns (integers, decimals, a date, a timestamp, strings, a double, a
boolean) in several files, for the landing-parse benchmark."""

from __future__ import annotations

import csv
import random
from datetime import datetime, timedelta
from pathlib import Path

from pyspark.sql.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

WIDE_SCHEMA = StructType(
    [
        StructField("order_id", LongType()),
        StructField("store_id", IntegerType()),
        StructField("region", StringType()),
        StructField("amount", DecimalType(12, 2)),
        StructField("unit_price", DecimalType(10, 4)),
        StructField("quantity", IntegerType()),
        StructField("order_date", DateType()),
        StructField("ordered_at", TimestampType()),
        StructField("customer", StringType()),
        StructField("category", StringType()),
        StructField("note", StringType()),
        StructField("sku", StringType()),
        StructField("discount", DoubleType()),
        StructField("gift", BooleanType()),
        StructField("coupon", StringType()),
        StructField("line_no", LongType()),
    ]
)
_START = datetime(2026, 1, 1)


def generate_wide_csv(
    folder: Path, rows: int, files: int, seed: int = 1, first_id: int = 0, days: int = 90
) -> list[Path]:
    """Write `rows` rows (ids from `first_id`, times over `days` days) as `files` CSV files with a header under
    `folder`; their paths."""
    rnd = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    per_file = -(-rows // files)
    for index in range(files):
        path = folder / f"orders-{seed}-{index:03d}.csv"
        with path.open("w", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(WIDE_SCHEMA.names)
            for n in range(first_id + index * per_file, first_id + min(rows, (index + 1) * per_file)):
                at = _START + timedelta(seconds=rnd.randrange(86400 * days))
                out.writerow(
                    [
                        n,
                        rnd.randrange(500),
                        rnd.choice(("north", "south", "east", "west")),
                        f"{rnd.randrange(1_000_000) / 100:.2f}",
                        f"{rnd.randrange(1_000_000) / 10_000:.4f}",
                        rnd.randrange(1, 20),
                        at.date().isoformat(),
                        at.isoformat(sep=" "),
                        f"customer-{rnd.randrange(50_000)}",
                        f"category-{rnd.randrange(40)}",
                        "note " * rnd.randrange(0, 4),
                        f"sku-{n % 997}",
                        f"{rnd.random():.4f}",
                        rnd.choice(("true", "false")),
                        f"C{rnd.randrange(99_999):05d}",
                        n % 7,
                    ]
                )
        paths.append(path)
    return paths
