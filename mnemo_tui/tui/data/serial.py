"""Provides `SerialBackend`: a Backend wrapper that lets one thread at a time call the backend it wraps."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from mnemo_tui.backends import Backend
from mnemo_tui.backends.delegate import DelegatingBackend
from mnemo_tui.values.model import RecentQuery


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

    def snapshot_wire(self, query: RecentQuery) -> Iterator[list[str]] | None:
        with self._lock:
            chunks = self.inner.snapshot_wire(query)
        if chunks is None:
            return None
        return self._chunked(chunks)

    def _chunked(self, chunks: Iterator[list[str]]) -> Iterator[list[str]]:
        while True:
            # One chunk per lock: a long stream interleaves with other calls and is never held whole.
            with self._lock:
                chunk = next(chunks, None)
            if chunk is None:
                return
            yield chunk
