"""Work the server does on its event loop (docs/server.md, "Work on the event loop"): what would wait, or run
long, is done in a database thread instead; a write is never done twice; routing and the log batches."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import mnemo_tui.server.app  # noqa: F401 - registers the `segment` convertor
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.errors import Unavailable, WouldWait
from mnemo_tui.server.endpoints import Methods
from mnemo_tui.server.middleware import RawPath, unrouted
from mnemo_tui.server.pool import READ, WRITE, EnginePool
from mnemo_tui.server.run import configure_logging
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest


def _threads_used(pool: EnginePool) -> bool:
    return pool._started  # the workers start with the first call that needs one


def test_a_write_on_the_loop_whose_lock_another_process_holds_waits_in_a_thread_and_lands_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "served.db"
    Store(path).close()
    pool = EnginePool(lambda: Store(path, create=False), workers=2)
    other = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False
    )  # as another process: SQLite's lock only
    other.execute("BEGIN IMMEDIATE")
    atoms: list[str] = []

    async def main() -> None:
        result = await pool.run(lambda e: e.write("alice", WriteRequest(content="once")), at_once=WRITE)
        atoms.append(result.atom_id)

    loop = threading.Thread(target=asyncio.run, args=(main(),))
    loop.start()
    for _ in range(3000):  # bounded: until a database thread has taken the write
        if _threads_used(pool) and pool._jobs.empty():
            break
        loop.join(0.01)
    # The write waits for the lock in a database thread, the loop free meanwhile; nothing landed yet.
    assert _threads_used(pool) and pool._jobs.empty() and loop.is_alive() and not atoms
    assert other.execute("SELECT count(*) FROM atoms").fetchone()[0] == 0
    other.execute("COMMIT")
    loop.join(60)
    other.close()
    store = Store(path)
    contents = [e.content for e in store.recent("alice", RecentQuery(limit=10)).items]
    store.close()
    pool.close()
    assert contents == ["once"] and len(atoms) == 1  # written exactly once, once the lock was free


def test_a_write_whose_lock_a_thread_of_the_pool_holds_waits_on_the_loop_and_is_done_there_once(tmp_path: Path) -> None:
    # Handed to a thread, each such write found the lock held by the one before it: the writes kept going to
    # the threads (up to 600 in 1,600 under `wrk`), the loop and eight threads taking the interpreter in turns.
    path = tmp_path / "served.db"
    Store(path).close()
    pool = EnginePool(lambda: Store(path, create=False), workers=2)
    inside, release = threading.Event(), threading.Event()
    where: list[str] = []

    def hold(engine: Any) -> None:
        with engine.transaction():  # a write of one of the pool's threads, under way
            inside.set()
            release.wait(20)

    def write(engine: Any, content: str) -> Any:
        where.append(threading.current_thread().name)
        return engine.write("alice", WriteRequest(content=content))

    async def main() -> list[Any]:
        held = asyncio.ensure_future(pool.run(hold))
        for _ in range(2000):  # bounded: until the thread holds the lock
            if inside.is_set():
                break
            await asyncio.sleep(0.01)
        writes = [asyncio.ensure_future(pool.run(lambda e, c=c: write(e, c), at_once=WRITE)) for c in ("a", "b")]
        for _ in range(2000):  # bounded: both tried on the loop, found the lock held, and wait there
            if len(pool._parked) == 2:
                break
            await asyncio.sleep(0.01)
        assert len(pool._parked) == 2 and not any(w.done() for w in writes)
        release.set()
        await held
        return list(await asyncio.gather(*writes))

    loop = threading.current_thread().name
    results = asyncio.run(main())
    pool.close()
    assert inside.is_set() and all(r.created for r in results)
    assert set(where) == {loop}  # tried there while the lock was held, then done there: never in a thread
    store = Store(path, create=False)
    assert sorted(e.content for e in store.recent("alice", RecentQuery(limit=10)).items) == ["a", "b"]  # once each
    store.close()


def test_a_write_whose_lock_this_process_holds_is_not_begun_on_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "served.db"
    holder = Store(path)
    loop_engine = Store(path, create=False)
    assert loop_engine.never_wait() is True
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        with holder.transaction():  # another thread of this process is writing
            inside.set()
            release.wait(20)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert inside.wait(20)
        with pytest.raises(WouldWait):
            loop_engine.write("alice", WriteRequest(content="never"))
    finally:
        release.set()
        thread.join(20)
    assert loop_engine.recent("alice", RecentQuery(limit=5)).items == []  # nothing began, nothing is left
    loop_engine.write("alice", WriteRequest(content="now"))  # the lock is free: written at once
    assert [e.content for e in holder.recent("alice", RecentQuery(limit=5)).items] == ["now"]
    loop_engine.close()
    holder.close()


def test_a_read_past_its_moment_on_the_loop_is_done_whole_in_a_thread(tmp_path: Path) -> None:
    path = tmp_path / "served.db"
    store = Store(path)
    # Every entry is by the excluded author: the page scans all of them to find none.
    store.bulk_insert([("alice", WriteRequest(content=f"e{i}"), i + 1) for i in range(20_000)])
    expected = store.recent("alice", RecentQuery(exclude_author="alice", limit=20))
    store.close()
    pool = EnginePool(lambda: Store(path, create=False), workers=1)
    query = RecentQuery(exclude_author="alice", limit=20)

    async def main() -> object:
        return await pool.run(lambda e: e.recent("alice", query), at_once=READ)

    page = asyncio.run(main())
    used = _threads_used(pool)
    pool.close()
    assert page == expected and used

    quick = EnginePool(lambda: Store(path, create=False), workers=1)

    async def top() -> object:
        return await quick.run(lambda e: e.recent("alice", RecentQuery(limit=20)), at_once=READ)

    first = asyncio.run(top())
    assert len(first.items) == 20 and not _threads_used(quick)  # answered on the loop  # type: ignore[attr-defined]
    quick.close()


def test_short_reads_on_the_loop_are_never_cut_however_many_ran_before(tmp_path: Path) -> None:
    # SQLite counts a cached statement's steps over all its runs: the moment is this block's alone.
    path = tmp_path / "served.db"
    store = Store(path)
    store.bulk_insert([("alice", WriteRequest(content=f"e{i}"), i + 1) for i in range(300)])
    store.close()
    pool = EnginePool(lambda: Store(path, create=False), workers=1)
    query = RecentQuery(limit=100)

    async def main() -> int:
        pages = [await pool.run(lambda e: e.recent_wire("alice", query), at_once=READ) for _ in range(400)]
        return sum(len(p.items) for p in pages)

    total = asyncio.run(main())  # ~1,500 steps a page: 600,000 in all, six times the moment
    used = _threads_used(pool)
    pool.close()
    assert total == 400 * 100 and not used


def test_a_read_on_the_loop_does_not_wait_for_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "served.db"
    store = Store(path)
    store.write("alice", WriteRequest(content="before"))
    pool = EnginePool(lambda: Store(path, create=False), workers=1)
    with store.transaction() as db:  # a writer holds the lock for the whole read
        db.execute("UPDATE buckets SET last_created_at = last_created_at")

        async def main() -> list[str]:
            page = await pool.run(lambda e: e.recent("alice", RecentQuery(limit=5)), at_once=READ)
            return [e.content for e in page.items]

        contents = asyncio.run(main())
    used = _threads_used(pool)
    pool.close()
    store.close()
    assert contents == ["before"] and not used


def _route(scope: dict[str, Any]) -> tuple[int, Any]:
    """The status and answer of one request, by its ASGI scope, to an app routed as `mnemo serve` is (its
    `Methods`, `RawPath`, `Segment` parameters and 404/405 handler): each route answers its name and parameters."""

    def named(name: str) -> Any:
        async def handler(request: Request) -> Response:
            return JSONResponse({"route": name, "params": request.path_params})

        return handler

    app = Starlette(
        routes=[
            Route("/x/special", Methods({"POST": named("b")})),
            Route("/x/{item:segment}", Methods({"GET": named("a"), "DELETE": named("a"), "PUT": named("c")})),
            Route("/y", Methods({"GET": named("y")})),
        ],
        middleware=[Middleware(RawPath)],
        exception_handlers={HTTPException: unrouted},
    )
    app.router.redirect_slashes = False
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app({"type": "http", "headers": [], "query_string": b"", **scope}, receive, send))
    body = b"".join(m.get("body", b"") for m in sent[1:])
    headers = {k.decode(): v.decode() for k, v in sent[0]["headers"]}
    return sent[0]["status"], json.loads(body) | ({"allow": headers["allow"]} if "allow" in headers else {})


def test_a_literal_path_is_its_routes_alone_and_a_parameter_is_one_raw_segment_decoded_once() -> None:
    def at(method: str, path: str) -> dict[str, object]:  # the scope uvicorn gives: the decoded path and the raw one
        return {"method": method, "path": unquote(path), "raw_path": path.encode()}

    assert _route(at("POST", "/x/special")) == (200, {"route": "b", "params": {}})
    assert _route(at("GET", "/x/other")) == (200, {"route": "a", "params": {"item": "other"}})
    assert _route(at("PUT", "/x/other")) == (200, {"route": "c", "params": {"item": "other"}})
    assert _route(at("HEAD", "/y"))[0] == 200
    for method in ("GET", "DELETE", "PUT"):  # `/x/special` is not an `{item}`: its own methods only
        status, answer = _route(at(method, "/x/special"))
        assert (status, answer["code"], answer["allow"]) == (405, "METHOD_NOT_ALLOWED", "POST")
        status, answer = _route(at(method, "/x/speci%61l"))  # the same literal path, spelled escaped
        assert (status, answer["allow"]) == (405, "POST")
    status, answer = _route(at("PATCH", "/x/other"))
    assert (status, answer["allow"]) == (405, "DELETE, GET, HEAD, PUT")  # every method of the path, sorted
    assert _route(at("GET", "/y/"))[1]["code"] == "NOT_FOUND"  # a trailing slash is an unknown path, no redirect
    assert _route(at("GET", "/x/a/b"))[0] == 404  # a parameter is one path segment
    # Routed on the raw path, each segment decoded once: an escaped slash stays inside its segment.
    assert _route(at("GET", "/x/a%2Fb"))[1]["params"] == {"item": "a/b"}
    assert _route(at("GET", "/x/a%252Fb"))[1]["params"] == {"item": "a%2Fb"}
    assert _route(at("GET", "/x/100%25"))[1]["params"] == {"item": "100%"}
    assert _route(at("GET", "/%79"))[1]["route"] == "y"
    assert _route(at("GET", "/x%2Fspecial"))[0] == 404
    assert _route(at("GET", "/x/caf%C3%A9"))[1]["params"] == {"item": "caf\u00e9"}
    assert _route(at("GET", "/x/%FF"))[1]["code"] == "NOT_FOUND"  # not UTF-8: no endpoint
    assert _route({"method": "GET", "path": "/x/a"})[1]["params"] == {"item": "a"}  # a server without raw_path


def test_log_lines_are_batched_but_never_lost_and_a_warning_is_written_at_once() -> None:
    stream = io.StringIO()
    handler = configure_logging(stream)
    try:
        logging.getLogger("mnemo.access").info("line %d", 1)
        logging.getLogger("mnemo.server").warning("trouble")
        assert stream.getvalue().count("\n") == 2 and "line 1" in stream.getvalue()  # the warning flushed both
        logging.getLogger("mnemo.access").info("line %d", 2)
        deadline = time.monotonic() + 10
        while "line 2" not in stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "line 2" in stream.getvalue()  # written within the flush interval, without a warning
        logging.getLogger("mnemo.access").info("line %d", 3)
        handler.line("mnemo.access", "line 4")  # the access log's own lines, spelled as the records are
    finally:
        handler.close()
        for name in ("mnemo.access", "mnemo.server", "uvicorn.error"):
            logging.getLogger(name).handlers.clear()
    assert "line 3" in stream.getvalue()  # closing writes what is pending
    lines = stream.getvalue().splitlines()
    shape = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} mnemo\.(access|server) (INFO|WARNING) ")
    assert len(lines) == 5 and all(shape.match(line) for line in lines), lines
    assert lines[-1].endswith(" mnemo.access INFO line 4")


def test_a_closed_pool_refuses_at_once_and_closing_never_raises(tmp_path: Path) -> None:
    path = tmp_path / "served.db"
    Store(path).close()
    pool = EnginePool(lambda: Store(path, create=False), workers=1)
    gone = asyncio.new_event_loop()
    stuck: asyncio.Future[None] = gone.create_future()
    gone.close()
    pool._jobs.put((lambda e: None, stuck, gone))  # a job whose caller's loop is already closed
    pool.close()  # drops it without raising

    async def after() -> object:
        return await asyncio.wait_for(pool.run(lambda e: e.ping(), at_once=READ), 5)

    with pytest.raises(Unavailable):
        asyncio.run(after())


def test_the_loop_writes_and_a_thread_copies_the_log_back(tmp_path: Path, monkeypatch: Any) -> None:
    import mnemo_tui.server.pool as pool_module

    monkeypatch.setattr(pool_module, "CHECKPOINT_WRITES", 5)
    path = tmp_path / "served.db"
    Store(path).close()
    pool = EnginePool(lambda: Store(path, create=False), workers=1)
    assert pool._now is not None and pool._now.db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0

    async def main() -> None:
        for i in range(5):
            await pool.run(lambda e, i=i: e.write("alice", WriteRequest(content=f"w{i}")), at_once=WRITE)
        for _ in range(200):  # the checkpoint runs in a thread, nobody waiting for it
            await asyncio.sleep(0.02)
            if _in_file(path) == 5:
                return

    asyncio.run(main())
    pool.close()
    assert _in_file(path) == 5  # the store file itself holds them, not only its log


def test_a_checkpoint_copies_the_rest_of_the_log_with_this_processs_writes_held_off(tmp_path: Path) -> None:
    # A checkpoint that the loop's writes keep overtaking never copies the whole log, and such a log is
    # never started over: under load it grew by hundreds of MB a minute. What the first, unlocked copy
    # could not take, it copies holding the in-process write lock (counted among the waiting, so the
    # loop's writes wait meanwhile); then the next write starts the log over.
    from mnemo_tui.engine.sqlite.database import _writer

    path = tmp_path / "served.db"
    engine = Store(path)
    engine.db.execute("PRAGMA wal_autocheckpoint = 0")
    for i in range(20):
        engine.write("alice", WriteRequest(content=f"w{i}"))
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM atoms").fetchone()  # a snapshot that needs the log's later part
    for i in range(50):
        engine.write("alice", WriteRequest(content=f"x{i}"))  # what the first copy cannot take
    writer = _writer(engine.identity)
    writer.acquire(True)  # a write of this process is under way
    other = Store(path)
    copier = threading.Thread(target=other.checkpoint)
    copier.start()
    try:
        for _ in range(3000):  # bounded: the thread counts itself among the waiting at once
            if writer.waiting == 1:
                break
            copier.join(0.01)
        assert writer.waiting == 1 and copier.is_alive()  # it waits for the write, it does not race it
        reader.execute("COMMIT")  # the old snapshot is gone: now the whole log can be copied
    finally:
        writer.release()
    copier.join(30)
    assert not copier.is_alive()
    engine.write("alice", WriteRequest(content="after"))  # the whole log was copied: it starts over
    assert _log_frames(path) < 20  # the one write's frames, not the seventy before it
    reader.close()
    other.close()
    engine.close()


def _log_frames(path: Path) -> int:
    """Frames in the write-ahead log since it last started over (what a passive checkpoint reports)."""
    db = sqlite3.connect(path)
    try:
        return int(db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])
    finally:
        db.close()


def _in_file(path: Path) -> int:
    """Entries in the store file itself, its write-ahead log ignored (what a checkpoint copied back)."""
    db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return int(db.execute("SELECT count(*) FROM atoms").fetchone()[0])
    finally:
        db.close()


def test_the_loop_never_writes_ahead_of_a_thread_waiting_for_the_lock(tmp_path: Path) -> None:
    from mnemo_tui.engine.sqlite.database import _writer

    path = tmp_path / "served.db"
    loop_engine = Store(path)
    loop_engine.never_wait()
    writer = _writer(loop_engine.identity)
    writer.waiting += 1  # a database thread is waiting for the lock (free this instant)
    try:
        with pytest.raises(WouldWait):
            loop_engine.write("alice", WriteRequest(content="not first"))
    finally:
        writer.waiting -= 1
    loop_engine.write("alice", WriteRequest(content="now"))
    assert [e.content for e in loop_engine.recent("alice", RecentQuery(limit=5)).items] == ["now"]
    loop_engine.close()


def test_a_stream_that_fails_loses_log_lines_never_a_request() -> None:
    class Broken(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(28, "No space left on device")

    handler = configure_logging(Broken())
    try:
        for i in range(25_000):
            handler.line("mnemo.access", f"line {i}")
        logging.getLogger("mnemo.server").warning("store unavailable")  # flushes at once: must not raise
        assert len(handler._pending) <= 10_000  # bounded while the stream takes nothing
        assert handler._flusher.is_alive()
    finally:
        handler.close()
        for name in ("mnemo.access", "mnemo.server", "uvicorn.error"):
            logging.getLogger(name).handlers.clear()
