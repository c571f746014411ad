"""Provides the request rate limits of `mnemo serve`: a token bucket per API key, and one per client address
for requests without a valid key (docs/server.md, "Rate limits")."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from mnemo_tui.errors import RateLimited
from mnemo_tui.values.model import Value


class Rate(Value):
    """`burst` requests at once, refilled at `per_second`."""

    per_second: float
    burst: int


# Generous: one key of the `wrk` benchmark asks ~2,000 requests/s of one core; a key still cannot take a
# server of several cores alone. Requests without a valid key (a scan, a guessed key) get far fewer.
PER_KEY = Rate(per_second=5000.0, burst=10_000)
PER_ADDRESS = Rate(per_second=20.0, burst=100)
MOST_NAMES = 100_000  # buckets kept at once, each a few dozen bytes


class Buckets:
    """Token buckets by name (a key, an address), at most `most` of them: past it the full ones (their name
    quiet long enough) go first, then the oldest half. Counted on the event loop only: no lock."""

    def __init__(self, rate: Rate, clock: Callable[[], float], most: int) -> None:
        self.rate = rate
        self.clock = clock
        self.most = most
        self.buckets: dict[str, tuple[float, float]] = {}  # name -> (tokens, when counted)

    def take(self, name: str) -> float:
        """One request of `name`: 0 when it may go, else the seconds until it may."""
        now = self.clock()
        tokens, then = self.buckets.get(name, (float(self.rate.burst), now))
        tokens = min(float(self.rate.burst), tokens + (now - then) * self.rate.per_second)
        if tokens < 1:
            self.buckets[name] = (tokens, now)
            return (1 - tokens) / self.rate.per_second
        if name not in self.buckets and len(self.buckets) >= self.most:
            self._prune(now)
        self.buckets[name] = (tokens - 1, now)
        return 0.0

    def _prune(self, now: float) -> None:
        full = self.rate.burst / self.rate.per_second
        for name in [n for n, (_, then) in self.buckets.items() if now - then >= full]:
            del self.buckets[name]
        if len(self.buckets) >= self.most:
            for name in list(self.buckets)[: len(self.buckets) // 2 + 1]:
                del self.buckets[name]


class Limits:
    """The server's rate limits: `per_key` for requests with a valid key, `per_address` for the others."""

    def __init__(
        self,
        per_key: Rate = PER_KEY,
        per_address: Rate = PER_ADDRESS,
        *,
        clock: Callable[[], float] = time.monotonic,
        most: int = MOST_NAMES,
    ) -> None:
        self.keys = Buckets(per_key, clock, most)
        self.addresses = Buckets(per_address, clock, most)

    def key(self, key: str) -> None:
        """Raises: RateLimited: the key is past its rate (`retry_after` says for how long)."""
        _refuse(self.keys.take(key), "this key")

    def address(self, address: str) -> None:
        """Raises: RateLimited: the address is past its rate for requests without a valid key."""
        _refuse(self.addresses.take(address), "requests without a valid key from this address")


class Limited(RateLimited):
    """A request past its rate, and when the next one may come (`Retry-After`, whole seconds)."""

    def __init__(self, message: str, wait: float) -> None:
        super().__init__(message, details={"retry_after": math.ceil(wait)})
        self.retry_after = max(1, math.ceil(wait))


def _refuse(wait: float, who: str) -> None:
    if wait > 0:
        raise Limited(f"{who} sent too many requests; retry after {max(1, math.ceil(wait))} s", wait)
