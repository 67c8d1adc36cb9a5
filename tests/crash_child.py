"""Child process for crash tests: runs the pipeline and SIGKILLs itself (with its JVM) inside a batch.

Usage: python -m tests.crash_child HOME CATALOG TABLE BATCH_ID before|after
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
from pathlib import Path

from infra.settings import Settings
from infra.spark import get_spark
from pipelines.pipeline import run_pipeline
from pipelines.registry import Registry
from pipelines.sinks import BatchContext
from tests.crash_registry import crash_registry


@dataclasses.dataclass(frozen=True)
class KillingSink:
    """Delegates to the real sink and kills the whole process group at one batch."""

    inner: object
    batch_id: int
    when: str

    def write(self, ctx: BatchContext, df) -> None:
        if ctx.batch_id == self.batch_id and self.when == "before":
            os.killpg(os.getpgid(0), signal.SIGKILL)
        self.inner.write(ctx, df)
        if ctx.batch_id == self.batch_id and self.when == "after":
            # The tables are committed, the checkpoint's commit for this batch is not.
            os.killpg(os.getpgid(0), signal.SIGKILL)


def main() -> None:
    home, catalog, target, batch_id, when = sys.argv[1:6]
    settings = dataclasses.replace(Settings.from_env(home=home).with_home(Path(home)), catalog_name=catalog)
    specs = [
        dataclasses.replace(spec, sink=KillingSink(spec.sink, int(batch_id), when)) if spec.name == target else spec
        for spec in crash_registry()
    ]
    run_pipeline(get_spark(settings), settings, Registry(specs))
    sys.exit(3)  # reaching here means the kill point was never hit


if __name__ == "__main__":
    main()
