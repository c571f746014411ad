"""Provides the server's database threads: worker threads that each hold their own engine connection."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from queue import Empty, SimpleQueue
from typing import Any, TypeVar

from mnemo_tui.engine.interface import Engine
from mnemo_tui.errors import MnemoError, Unavailable, WouldWait

T = TypeVar("T")
DEFAULT_WORKERS = 8
Opener = Callable[[], Engine]
READ, LOOKUP, WRITE = "read", "lookup", "write"  # what `EnginePool.run(at_once=...)` may do on the event loop
# Writes on the event loop between two checkpoints in a thread: a few pages each, about SQLite's own
# automatic checkpoint of 1,000 pages.
CHECKPOINT_WRITES = 256
Job = tuple[Callable[[Engine], Any], "asyncio.Future[Any]", asyncio.AbstractEventLoop, float]  # and when queued


class EnginePool:
    """Runs database work off the event loop, one engine (one connection) per worker thread.

    SQLite serialises writers itself (WAL, `BEGIN IMMEDIATE`, `busy_timeout`); readers on their
    own connections never wait for each other, so concurrent clients share nothing but the file.
    A call is one hop each way: a job on a queue the workers wait on, and its result handed back to
    the event loop (`call_soon_threadsafe`), with nothing between.

    Args:
        opener: opens one engine connection (called once up front, so a bad store fails at start-up,
            then once per worker thread).
        workers: how many database threads.
        limit: seconds any one call may run in its thread (every statement is stopped past it).
        on_loop: whether the connection opened up front answers on the event loop what it can
            (`run(at_once=...)`); the health probe's pool never does.
    """

    def __init__(
        self, opener: Opener, workers: int = DEFAULT_WORKERS, *, limit: float | None = None, on_loop: bool = True
    ) -> None:
        self._opener = opener
        self.limit = limit
        self._local = threading.local()
        self._guard = threading.Lock()
        first = opener()
        self._opened: list[Engine] = [first]
        # The engine opened up front answers on the event loop what it can answer without waiting.
        self._now = first if on_loop and first.never_wait() else None
        self._jobs: SimpleQueue[Job | None] = SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"mnemo-db-{n}", daemon=True) for n in range(max(1, workers))
        ]
        self._started = False
        self._closed = False
        self._written_at_once = 0
        # Jobs handed to the threads and not yet done, and the loop's writes waiting for one to be (under
        # `_busy_lock`: counted by the threads, so a loop that closed meanwhile leaves the count true).
        self._in_threads = 0
        self._parked: list[asyncio.Future[None]] = []
        # What the metrics read (server/metrics.py): each job's wait for a thread, the threads busy.
        self.observe_wait: Callable[[float], None] | None = None
        self.size = len(self._threads)
        self.busy = 0
        self._busy_lock = threading.Lock()

    def engine(self) -> Engine:
        """This thread's engine, opened on first use."""
        found: Engine | None = getattr(self._local, "engine", None)
        if found is None:
            found = self._opener()
            self._local.engine = found
            with self._guard:
                self._opened.append(found)
        return found

    async def run(self, fn: Callable[[Engine], T], *, at_once: str | None = None) -> T:
        """Run `fn(engine)` in a worker thread with that thread's engine.

        `at_once` tries it first on the calling thread (the event loop), when the engine can answer there
        without waiting for a lock or a network (`Engine.never_wait`); what would wait is done in a
        worker thread, as any other call (docs/server.md, "Work on the event loop"):
        - `READ`, a read: stopped, and done whole in a thread, when it would wait or runs more than a
          moment (`Engine.briefly`);
        - `LOOKUP`, a read of one row by a unique key (an API key's): the same, without counting its
          steps, which it has too few of to run long;
        - `WRITE`, one bounded write: begun only when its write lock is free (`WouldWait`, raised before
          anything began; nothing else is retried, so nothing is ever written twice). While one of this
          pool's threads holds or waits for the lock, the write waits on the loop for a thread's answer and
          tries again there; with none, the lock is another process's, and a thread waits for it.

        Raises:
            MnemoError: what `fn` raises as its answer (an unknown key is an answer, not a wait).
        """
        if self._closed:
            raise Unavailable("the server is stopping")
        engine = self._now
        if at_once == WRITE and engine is not None:
            # Not handed to a thread while ours hold the lock: each write sent to a thread found the lock held
            # by the one before it, so the writes kept going to threads, the loop and eight threads taking the
            # interpreter in turns (up to 600 writes in 1,600 under `wrk`).
            while True:
                try:
                    result = fn(engine)
                except WouldWait:
                    if not await self._a_thread_answers():
                        break  # none of ours has work: the lock is another process's, a thread waits for it
                    if self._closed:
                        raise Unavailable("the server is stopping") from None
                else:
                    self._written_at_once += 1
                    if self._written_at_once % CHECKPOINT_WRITES == 0:
                        self._checkpoint()
                    return result
        elif at_once in (READ, LOOKUP) and engine is not None:
            try:
                if at_once == LOOKUP:
                    return fn(engine)
                with engine.briefly():
                    return fn(engine)
            except MnemoError:
                raise
            except Exception:  # noqa: BLE001 - it would have waited, or run long: a database thread does it
                pass
        if not self._started:
            with self._guard:
                if not self._started:
                    for thread in self._threads:
                        thread.start()
                    self._started = True
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._busy_lock:
            self._in_threads += 1
        self._jobs.put((fn, future, loop, time.perf_counter()))
        return await future

    async def _a_thread_answers(self) -> bool:
        """Wait on the loop until a job of this pool's threads is done (or the pool closes); False at once when
        the threads have none."""
        with self._busy_lock:
            if not self._in_threads:
                return False
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._parked.append(waiter)  # one future each: a cancelled wait cancels no other
        await waiter
        return True

    def _done(self) -> None:
        """In any thread: a job handed to the threads is done (or dropped); the writes waiting for one try again."""
        with self._busy_lock:
            self._in_threads -= 1
            parked, self._parked = self._parked, []
        for waiter in parked:
            with suppress(RuntimeError):  # its loop closed: nothing waits there any more
                waiter.get_loop().call_soon_threadsafe(_wake, waiter)

    def queued(self) -> int:
        """Jobs waiting for a thread now."""
        return self._jobs.qsize()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, future, loop, queued = job
            if self.observe_wait is not None:
                self.observe_wait(time.perf_counter() - queued)
            with self._busy_lock:
                self.busy += 1
            try:
                result = self._call(fn)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, whatever it is
                self._settle(loop, future, None, exc)
            else:
                self._settle(loop, future, result, None)
            finally:
                with self._busy_lock:
                    self.busy -= 1
                self._done()

    @staticmethod
    def _settle(
        loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], result: Any, exc: BaseException | None
    ) -> None:
        def settle() -> None:
            if future.cancelled():
                return
            if exc is not None:
                future.set_exception(exc)
            else:
                future.set_result(result)

        try:
            loop.call_soon_threadsafe(settle)
        except RuntimeError:  # the loop closed meanwhile: nobody waits for this answer any more
            pass

    def _call(self, fn: Callable[[Engine], T]) -> T:
        engine = self.engine()

        with engine.time_limit(self.limit):
            return fn(engine)

    def _checkpoint(self) -> None:
        """Copy the write-ahead log back into the store in a database thread, nobody waiting for it: the
        event loop's connection never does it at commit (`Engine.never_wait`), and its writes are most."""

        def done(future: asyncio.Future[None]) -> None:
            if not future.cancelled():
                future.exception()  # a failed checkpoint is retried by the next one; nothing to report

        asyncio.ensure_future(self.run(lambda engine: engine.checkpoint())).add_done_callback(done)

    def close(self) -> None:
        """Stop the workers (jobs not yet started are cancelled) and close every connection."""
        self._closed = True
        while True:
            try:
                job = self._jobs.get_nowait()
            except Empty:
                break
            if job is not None:
                with suppress(RuntimeError):  # its loop is closed: nobody waits for it
                    job[2].call_soon_threadsafe(job[1].cancel)
                self._done()  # dropped: what waits for a thread's answer has it
        if self._started:
            for _ in self._threads:
                self._jobs.put(None)
            for thread in self._threads:
                thread.join()
        with self._guard:
            for engine in self._opened:
                engine.close()
            self._opened.clear()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
