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
        self.burst, self.per_second = float(rate.burst), rate.per_second  # read by every request
        # name -> [tokens, when counted]: a bucket is changed in place, every request of its name.
        self.buckets: dict[str, list[float]] = {}

    def take(self, name: str) -> float:
        """One request of `name`: 0 when it may go, else the seconds until it may."""
        now = self.clock()
        bucket = self.buckets.get(name)
        if bucket is None:
            if len(self.buckets) >= self.most:
                self._prune(now)
            bucket = self.buckets[name] = [self.burst, now]
        tokens = bucket[0] + (now - bucket[1]) * self.per_second
        if tokens > self.burst:
            tokens = self.burst
        bucket[1] = now
        if tokens < 1:
            bucket[0] = tokens
            return (1 - tokens) / self.per_second
        bucket[0] = tokens - 1
        return 0.0

    def _prune(self, now: float) -> None:
        full = self.burst / self.per_second
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
        wait = self.keys.take(key)
        if wait > 0:
            _refuse(wait, "this key")

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
