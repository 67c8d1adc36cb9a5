"""The demo registry with one landing file per bronze batch, so a run has several batches to crash in."""

from __future__ import annotations

import dataclasses

from pipelines.datasets import default_registry
from pipelines.spec.registry import Registry
from pipelines.spec.sources import FileSource


def crash_registry() -> Registry:
    """Demo specs; bronze reads one file per micro-batch."""
    specs = []
    for spec in default_registry():
        if isinstance(spec.source, FileSource):
            spec = dataclasses.replace(spec, source=dataclasses.replace(spec.source, max_files_per_trigger=1))
        specs.append(spec)
    return Registry(specs)
