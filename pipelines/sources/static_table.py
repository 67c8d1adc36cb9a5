"""A registry table read whole when a run starts: the reference side of a stream-static join (`StaticSource`).

It is only ever a secondary input (`pipelines.spec.modes`): the table stream it joins reads it
(`pipelines.sources.streams`), so as a kind it has no run of its own.
"""

from __future__ import annotations

from infra.errors import ConfigError
from pipelines.sources.base import Run, SourceKind


class StaticKind(SourceKind):
    """A reference table (`StaticSource`)."""

    def read_batches(self, run: Run) -> None:
        """A reference table cannot drive a run."""
        raise ConfigError(
            f"table {run.spec.name}: its main input is the reference table {self.source.read_table()}, which "
            "is read whole and never streams; read a table as a stream first and join the reference table to it"
        )
