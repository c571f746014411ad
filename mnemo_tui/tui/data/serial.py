"""Provides `SerialBackend`: a Backend wrapper that lets one thread at a time call the backend it wraps."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from mnemo_tui.backends import Backend
from mnemo_tui.backends.delegate import DelegatingBackend
from mnemo_tui.model import RecentQuery


class SerialBackend(DelegatingBackend):
    """The TUI's workers run on several threads; backends are synchronous and need not be thread-safe.

    Each call holds the lock for that call only, so a long catch-up walk interleaves with the
    feed's page loads instead of blocking them.
    """

    def __init__(self, inner: Backend) -> None:
        super().__init__(inner)
        self._lock = threading.RLock()

    def _guard(self) -> threading.RLock:
        return self._lock

    @property
    def probe(self) -> Callable[[], tuple[int, int]] | None:
        """The wrapped backend's cheap change probe (`change_token`), or None when it has none."""
        inner_probe = getattr(self.inner, "change_token", None)
        if not callable(inner_probe):
            return None

        def locked() -> tuple[int, int]:
            with self._lock:
                token: tuple[int, int] = inner_probe()
                return token

        return locked

    def stream_wire(self, query: RecentQuery) -> Iterator[list[str]]:
        with self._lock:
            chunks = self.inner.stream_wire(query)
        while True:
            # One chunk per lock: a long stream interleaves with other calls and is never held whole.
            with self._lock:
                chunk = next(chunks, None)
            if chunk is None:
                return
            yield chunk
