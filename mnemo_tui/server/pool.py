"""Provides the server's database threads: a thread pool in which each worker holds its own engine connection."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from mnemo_tui.engine.interface import Engine

T = TypeVar("T")
DEFAULT_WORKERS = 8
Opener = Callable[[], Engine]


class EnginePool:
    """Runs database work off the event loop, one engine (one connection) per worker thread.

    SQLite serialises writers itself (WAL, `BEGIN IMMEDIATE`, `busy_timeout`); readers on their
    own connections never wait for each other, so concurrent clients share nothing but the file.

    Args:
        opener: opens one engine connection (called once up front, so a bad store fails at start-up,
            then once per worker thread).
        workers: how many database threads.
        limit: seconds any one call may run in its thread (every statement is stopped past it).
    """

    def __init__(self, opener: Opener, workers: int = DEFAULT_WORKERS, *, limit: float | None = None) -> None:
        self._opener = opener
        self.limit = limit
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mnemo-db")
        self._local = threading.local()
        self._guard = threading.Lock()
        self._opened: list[Engine] = [opener()]

    def engine(self) -> Engine:
        """This thread's engine, opened on first use."""
        found: Engine | None = getattr(self._local, "engine", None)
        if found is None:
            found = self._opener()
            self._local.engine = found
            with self._guard:
                self._opened.append(found)
        return found

    async def run(self, fn: Callable[[Engine], T]) -> T:
        """Run `fn(engine)` in a worker thread with that thread's engine."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call, fn)

    def _call(self, fn: Callable[[Engine], T]) -> T:
        engine = self.engine()
        with engine.time_limit(self.limit):
            return fn(engine)

    def close(self) -> None:
        """Stop the workers and close every connection."""
        self._executor.shutdown(wait=True, cancel_futures=True)
        with self._guard:
            for engine in self._opened:
                engine.close()
            self._opened.clear()
