"""Child process for the scratch test: starts the home's JVM, runs a query, prints the JVM's temp folder, and
SIGKILLs its whole process group (with the JVM), leaving that JVM's temporary files behind.

Usage: python -m tests.support.scratch_child HOME
"""

from __future__ import annotations

import os
import signal
import sys

from infra.settings import Settings
from infra.spark import get_spark


def main() -> None:
    spark = get_spark(Settings.from_env(home=sys.argv[1]))
    spark.range(10).selectExpr("sum(id)").collect()
    print(spark.sparkContext._jvm.System.getProperty("java.io.tmpdir"), flush=True)
    os.killpg(os.getpgid(0), signal.SIGKILL)


if __name__ == "__main__":
    main()
