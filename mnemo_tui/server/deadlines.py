"""Provides `Deadlines`: one timer that watches every deadline of a server (a request's headers, its body).

A timer per connection or per request would be a cost of each; this one ticks only while something is
watched, and calls what is late at most a tenth of its allowance after it was due.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable

MIN_PERIOD = 0.01  # seconds between two ticks at the least


class Deadlines:
    """When each watched thing is due, and what to call when it is late; one timer on the running loop."""

    def __init__(self) -> None:
        self._due: dict[Hashable, tuple[float, Callable[[], None]]] = {}
        self._period = float("inf")
        self._shortest = float("inf")  # the smallest allowance watched so far (the period is a tenth of it)
        self._tick: asyncio.TimerHandle | None = None  # the next tick, while something is watched
        self._loop: asyncio.AbstractEventLoop | None = None

    def expect(self, what: Hashable, seconds: float, late: Callable[[], None]) -> None:
        """`what` is due within `seconds` from now; `late()` is called once if it is not dropped by then."""
        loop = asyncio.get_running_loop()
        self._due[what] = (loop.time() + seconds, late)
        if seconds >= self._shortest and self._tick is not None and self._loop is loop:
            return  # ticking on this loop, often enough for this allowance (every request's way)
        self._shortest = min(self._shortest, seconds)
        # A late one is called at most a tenth of the smallest allowance watched after it was due.
        period = max(MIN_PERIOD, seconds / 10)
        shorter = period < self._period
        self._period = min(self._period, period)
        # Not ticking, ticking on a loop that is gone (a test's), or too slowly for this allowance: tick anew.
        if self._tick is None or self._loop is not loop or (shorter and self._tick.when() > loop.time() + period):
            if self._tick is not None:
                self._tick.cancel()
            self._loop = loop
            self._tick = loop.call_later(self._period, self._watch, loop)

    def drop(self, what: Hashable) -> None:
        """`what` arrived (or is gone): nothing is called for it."""
        self._due.pop(what, None)

    def __contains__(self, what: Hashable) -> bool:
        return what in self._due

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        self._tick = None  # an `expect` from a call below may start the next tick itself
        now = loop.time()
        late = [what for what, (due, _) in self._due.items() if now >= due]
        for what in late:
            _, call = self._due.pop(what)
            call()
        if self._due and self._tick is None:
            self._tick = loop.call_later(self._period, self._watch, loop)
