"""Provides the progress line of a long walk, on stderr when it is a terminal."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from mnemo_tui.cli import terminal

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO


class Progress:
    """A count on stderr while a long walk runs, only when stderr is a terminal (never in a pipe or a log).

    The count is what was delivered (each page once its output was flushed), shown as the pages are
    printed, at most every `INTERVAL` seconds of `clock`; `settle` shows the exact count when a walk
    stops before its end (Ctrl-C), so the line is never stale: it used to wait 1,000 items, so a
    first page of 1 left `1 new so far…` on screen while hundreds more went out.
    """

    INTERVAL = 0.1

    def __init__(
        self,
        noun: str,
        stream: IO[str] | None = None,
        total: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream or sys.stderr
        self.noun = noun
        self.total = total  # known: a bar, else a running count
        self.enabled = terminal.is_tty(self.stream)
        self.shown = False
        self.clock = clock
        self._count = 0  # the latest count given
        self._last = 0  # the count on screen
        self._at = 0.0  # when it was put there

    def expect(self, total: int) -> None:
        """The count the work will reach: a bar from now on."""
        self.total = total

    def update(self, count: int) -> None:
        """The count now: shown at once the first time, then at most every `INTERVAL` seconds."""
        if not self.enabled:
            return
        self._count = count
        now = self.clock()
        if self.shown and (count == self._last or now - self._at < self.INTERVAL):
            return
        self._at = now
        self._show(count)

    def settle(self) -> None:
        """Show the exact latest count (a walk stopped before its end leaves a true line on screen)."""
        if self.shown and self._count != self._last:
            self._show(self._count)

    def _show(self, count: int) -> None:
        self._last = count
        self.shown = True
        if self.total:
            done = min(count, self.total) / self.total
            bar = "#" * int(done * 30)
            self.stream.write(f"\r[{bar:<30}] {done:4.0%} {count:,}/{self.total:,} {self.noun}")
        else:
            self.stream.write(f"\r{count:,} {self.noun} so far…")
        self.stream.flush()

    def done(self) -> None:
        """Erase the count line."""
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False
