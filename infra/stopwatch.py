"""Where a run's time goes: seconds per named stage, summed over every time the stage is entered."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class Stopwatch:
    """Accumulates wall seconds per stage; stages may nest (an outer stage includes its inner ones)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block as `name` (added to what `name` already holds)."""
        self.seconds.setdefault(name, 0.0)
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - started

    def rounded(self, digits: int = 3) -> dict[str, float]:
        """The stages and their seconds, rounded, in the order they were first entered."""
        return {name: round(value, digits) for name, value in self.seconds.items()}
