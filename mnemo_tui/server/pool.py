"""Provides the server's database threads: a thread pool in which each worker holds its own `Store` connection."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from mnemo_tui.engine.store import Store

T = TypeVar("T")
DEFAULT_WORKERS = 8


class StorePool:
    """Runs database work off the event loop, one `Store` (one SQLite connection) per worker thread.

    SQLite serialises writers itself (WAL, `BEGIN IMMEDIATE`, `busy_timeout`); readers on their
    own connections never wait for each other, so concurrent clients share nothing but the file.
    """

    def __init__(self, path: Path | str, workers: int = DEFAULT_WORKERS) -> None:
        self.path = Path(path)
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mnemo-db")
        self._local = threading.local()
        self._opened: list[Store] = []
        self._guard = threading.Lock()
        # Open (and migrate) the store once up front, so a bad file fails at start-up, not per request.
        self._opened.append(Store(self.path))

    def store(self) -> Store:
        """This thread's store, opened on first use."""
        found: Store | None = getattr(self._local, "store", None)
        if found is None:
            found = Store(self.path)
            self._local.store = found
            with self._guard:
                self._opened.append(found)
        return found

    async def run(self, fn: Callable[[Store], T]) -> T:
        """Run `fn(store)` in a worker thread with that thread's store."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call, fn)

    def _call(self, fn: Callable[[Store], T]) -> T:
        return fn(self.store())

    def close(self) -> None:
        """Stop the workers and close every connection."""
        self._executor.shutdown(wait=True, cancel_futures=True)
        with self._guard:
            for store in self._opened:
                store.close()
            self._opened.clear()
