"""What `tributary run` and `tributary demo` show while tables run: on a terminal, a live line per running table
(rich); otherwise a plain line for a table still running every 10 s, and one when such a long run ends."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from pipelines.sources import progress

# A table that ends sooner says nothing in plain mode (the summary follows); a longer one says it is alive.
PLAIN_EVERY_SECONDS = 10.0


def _line(table: str, batches: int, rows: int, seconds: float) -> str:
    return f"{table}: {batches} batch{'es' if batches != 1 else ''}, {rows:,} rows so far, {seconds:.0f} s"


class PlainProgress:
    """Plain lines for long runs, for logs and pipes: `... <table>: 3 batches, 120,000 rows so far, 20 s`."""

    def __init__(self, out: TextIO, every: float = PLAIN_EVERY_SECONDS, clock=time.monotonic):
        self.out, self.every, self.clock = out, every, clock
        self.began: dict[str, float] = {}
        self.said: dict[str, float] = {}
        self.seen: dict[str, tuple[int, int]] = {}

    def started(self, table: str) -> None:
        self.began[table] = self.said[table] = self.clock()
        self.seen[table] = (0, 0)

    def progressed(self, table: str, batches: int, rows: int) -> None:
        self.seen[table] = (batches, rows)
        now = self.clock()
        if now - self.said.get(table, now) >= self.every:
            self.said[table] = now
            print(f"... {_line(table, batches, rows, now - self.began[table])}", file=self.out, flush=True)

    def ended(self, table: str, status: str, rows: int) -> None:
        began = self.began.pop(table, None)
        self.said.pop(table, None)
        self.seen.pop(table, None)
        if began is not None and self.clock() - began >= self.every:
            print(f"... {table}: {status}, {rows:,} rows in {self.clock() - began:.0f} s", file=self.out, flush=True)


class TerminalProgress(PlainProgress):
    """A live line per running table, redrawn in place (rich), and a kept line when each ends."""

    def __init__(self, live):
        super().__init__(live.console.file, every=0.0)
        self.live = live

    def _redraw(self) -> None:
        from rich.text import Text

        now = self.clock()
        lines = [_line(t, *self.seen[t], now - self.began[t]) for t in self.began]
        self.live.update(Text("\n".join(f"running {line}" for line in lines)))

    def started(self, table: str) -> None:
        super().started(table)
        self._redraw()

    def progressed(self, table: str, batches: int, rows: int) -> None:
        self.seen[table] = (batches, rows)
        self._redraw()

    def ended(self, table: str, status: str, rows: int) -> None:
        began = self.began.pop(table, self.clock())
        self.seen.pop(table, None)
        self.live.console.print(f"{status:<9} {table}: {rows:,} rows in {self.clock() - began:.1f} s")
        self._redraw()


@contextmanager
def shown(out: TextIO | None = None) -> Iterator[None]:
    """Show the progress of the table runs in this block: live on a terminal, plain lines otherwise."""
    out = out or sys.stdout
    if not out.isatty():
        with progress.watching(PlainProgress(out)):
            yield
        return
    from rich.console import Console
    from rich.live import Live

    live = Live(console=Console(file=out), transient=True, refresh_per_second=4)
    with live, progress.watching(TerminalProgress(live)):
        yield
