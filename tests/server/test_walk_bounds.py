"""The per-key bound on open streamed walks (`POST /memory/recent`, `Accept: application/x-ndjson`; docs/server.md,
"The streamed walk"): past it a 429 `TOO_MANY_WALKS` envelope, other keys still served, and a slot freed however
its walk ends; `mnemo recent --all` at the bound waits, then walks or gives up with exit 5."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui.engine.feed import JoinedPage
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.server import walk_stream
from mnemo_tui.server.app import App, create_app
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.cli import CliResult
from tests.support.wire import serving_app

WAIT = 20.0  # seconds any one awaited condition may take at most (a loaded machine; never a timing assertion)
RECENT = '"POST /api/v1/memory/recent"'
DOWN = threading.Event()  # set: `Failing` stores fail every page after a walk's first


class Failing(Store):
    """The store, whose pages after a walk's first fail while `DOWN` is set (a database that went away)."""

    def recent_wire_pages(self, who: str, query: RecentQuery, pages: int, max_bytes: int) -> list[JoinedPage]:
        if DOWN.is_set() and query.cursor is not None:
            raise OSError("the database went away")
        return super().recent_wire_pages(who, query, pages, max_bytes)


class Walker:
    """One streamed walk asked over ASGI by hand, whose client takes no line until `read`, and goes away on `leave`
    (uvicorn's send then returns at once, as it does for a client gone)."""

    def __init__(self, app: App, key: str, body: dict[str, Any] | None = None, request_id: str = "") -> None:
        headers = [(b"x-api-key", key.encode()), (b"accept", b"application/x-ndjson")]
        if request_id:
            headers.append((b"x-request-id", request_id.encode()))
        scope = {
            "type": "http",
            "method": "POST",
            "path": "/api/v1/memory/recent",
            "raw_path": b"/api/v1/memory/recent",
            "headers": headers,
            "client": ("127.0.0.1", 1),
        }
        self.body = json.dumps(body or {"limit": 100}).encode()
        self.asked = False
        self.started = asyncio.Event()
        self.flowing = asyncio.Event()
        self.gone = asyncio.Event()
        self.sent: list[dict[str, Any]] = []
        self.task = asyncio.get_running_loop().create_task(app(scope, self.receive, self.send))

    async def receive(self) -> dict[str, Any]:
        if not self.asked:
            self.asked = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.start":
            self.started.set()
        elif message.get("more_body"):
            await self.flowing.wait()  # a client that does not read holds the server's write

    def read(self) -> None:
        self.flowing.set()

    def leave(self) -> None:
        self.gone.set()
        self.flowing.set()

    async def opened(self) -> int:
        await asyncio.wait_for(self.started.wait(), WAIT)
        return int(self.sent[0]["status"])

    async def ended(self) -> None:
        await asyncio.wait_for(asyncio.shield(self.task), WAIT)

    @property
    def headers(self) -> dict[str, str]:
        return {k.decode(): v.decode() for k, v in self.sent[0]["headers"]}

    @property
    def body_sent(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")


def seeded(path: Path, n: int, pad: int = 0) -> dict[str, str]:
    """Keys of alice (with `n` entries, each `pad` characters more) and bob (with none)."""
    store = Store(path)
    keys = {who: store.create_key(who)[1] for who in ("alice", "bob")}
    filler = "x" * pad  # one long word: the full-text index stays small
    rows = [("alice", WriteRequest(content=f"entry {i} {filler}", domain="notes"), 1_000_000 + i) for i in range(n)]
    store.bulk_insert(rows)
    store.close()
    return keys


def test_a_key_past_its_walks_gets_429_others_are_served_and_a_walk_ended_any_way_frees_its_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(walk_stream, "MAX_WALKS_PER_KEY", 2)
    keys = seeded(tmp_path / "s.db", 250)  # three lines of 100: a walk held on its first is not done
    alice, bob = keys["alice"], keys["bob"]
    app = create_app(tmp_path / "s.db", workers=2, opener=partial(Failing, tmp_path / "s.db", create=False))
    walks = app.state.walks

    async def main() -> None:
        first, second = Walker(app, alice), Walker(app, alice)
        assert (await first.opened(), await second.opened()) == (200, 200)
        assert walks.held(alice) == 2

        third = Walker(app, alice, request_id="walk-3")
        await third.ended()
        assert third.sent[0]["status"] == 429
        assert third.headers["retry-after"] == "1" and third.headers["content-type"] == "application/json"
        envelope = json.loads(third.body_sent)
        assert envelope["code"] == "TOO_MANY_WALKS" and envelope["retryable"] is True
        assert envelope["requestId"] == "walk-3" and "2 streamed walks open already" in envelope["message"]
        assert walks.held(alice) == 2  # a refusal holds nothing

        other = Walker(app, bob)  # another key is served meanwhile, and its finished walk frees its slot
        other.read()
        await other.ended()
        assert other.sent[0]["status"] == 200 and json.loads(other.body_sent)["next_cursor"] is None
        assert walks.held(bob) == 0

        first.leave()  # the client goes away
        await first.ended()
        assert walks.held(alice) == 1
        refused = Walker(app, alice, {"cursor": "nope!"})  # refused after its slot was taken: given back
        await refused.ended()
        assert refused.sent[0]["status"] == 400 and walks.held(alice) == 1

        again = Walker(app, alice)
        assert await again.opened() == 200 and walks.held(alice) == 2
        second.read()  # read to its end
        await second.ended()
        assert [json.loads(line)["next_cursor"] is None for line in second.body_sent.splitlines()] == [0, 0, 1]
        assert walks.held(alice) == 1

        DOWN.set()  # the next page fails: the stream ends without its last line
        try:
            again.read()
            await again.ended()
        finally:
            DOWN.clear()
        assert json.loads(again.body_sent.splitlines()[-1])["next_cursor"] is not None
        assert walks.held(alice) == 0

        held = Walker(app, alice)
        assert await held.opened() == 200 and walks.held(alice) == 1
        app.end_streams()  # the server stops: a stream whose client does not read ends after `streamed.STOP_GRACE`
        await held.ended()
        assert walks.by_key == {}

    try:
        asyncio.run(main())
    finally:
        app.close()


def test_a_walk_whose_key_is_revoked_ends_before_its_next_part_without_its_last_line(tmp_path: Path) -> None:
    """A key revoked while its walk streams gets nothing more than the part in hand: the stream ends
    without its last line (the client asks again and gets the key's 401)."""
    path = tmp_path / "s.db"
    seeded(path, 100 * walk_stream.PART_PAGES * 3)  # three parts
    store = Store(path)
    key_id, key = store.create_key("alice")
    app = create_app(path, workers=2)

    async def main() -> None:
        walker = Walker(app, key)
        assert await walker.opened() == 200
        store.revoke_key(key_id)  # by another connection, as `mnemo keys revoke` does
        walker.read()
        await walker.ended()
        lines = [json.loads(line) for line in walker.body_sent.splitlines()]
        assert lines and lines[-1]["next_cursor"] is not None  # unfinished: no last line
        assert len(lines) <= 1 + walk_stream.PART_PAGES  # the first page and at most the part in hand
        again = Walker(app, key)  # what the client asks next, from its last cursor: the key's refusal
        await again.ended()
        assert again.sent[0]["status"] == 401 and json.loads(again.body_sent)["details"]["reason"] == "revoked_key"

    try:
        asyncio.run(main())
    finally:
        app.close()
        store.close()


# -- `mnemo recent --all` against a server whose bound is reached ------------------------------------------------

ENTRIES = 6000
PAD = 1000  # 6,000 lines of over 1 KB: more than a socket's buffers and a part in hand hold


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("walk-bounds") / "s.db"
    return path, seeded(path, ENTRIES, PAD)


class Served:
    def __init__(self, app: App, url: str, port: int, lines: list[str]) -> None:
        self.app, self.url, self.port, self.lines = app, url, port, lines

    def refused(self) -> int:
        return sum(1 for line in list(self.lines) if RECENT in line and '" 429 ' in line)


@pytest.fixture
def one_walk_a_key(big_store: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    monkeypatch.setattr(walk_stream, "MAX_WALKS_PER_KEY", 1)
    lines: list[str] = []
    app = create_app(big_store[0], workers=2, access=lines.append)
    with serving_app(app) as server:
        yield Served(app, server.url, server.port, lines)


def held_walk(port: int, key: str) -> socket.socket:
    """A streamed walk over a socket that reads its answer's head and nothing more: the walk stays open."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # no autotuning: the window stays small
    sock.settimeout(WAIT)
    sock.connect(("127.0.0.1", port))
    body = b'{"limit": 100}'
    sock.sendall(
        b"POST /api/v1/memory/recent HTTP/1.1\r\nHost: test\r\nX-Api-Key: %s\r\nAccept: application/x-ndjson\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (key.encode(), len(body), body)
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1024)
        assert chunk, "the server closed the connection without an answer"
        head += chunk
    assert head.startswith(b"HTTP/1.1 200 "), head[:200]
    return sock


def until(condition: Callable[[], bool], what: str) -> None:
    """Polls `condition` until it holds, for at most `WAIT` seconds (a bound, never a timing assertion)."""
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_recent_all_at_the_bound_retries_within_its_deadline_then_exits_5(
    one_walk_a_key: Served, big_store: tuple[Path, dict[str, str]], cli: Callable[..., CliResult]
) -> None:
    served, key = one_walk_a_key, big_store[1]["alice"]
    with held_walk(served.port, key):
        assert served.app.state.walks.held(key) == 1
        env = {"MNEMO_ENDPOINT": served.url, "MNEMO_API_KEY": key, "MNEMO_DEADLINE": "2.5"}
        result = cli("recent", "--all", "--format", "ndjson", env=env)
    assert result.code == 5 and result.stdout == ""
    assert "this key has 1 streamed walks open already" in result.stderr and "Traceback" not in result.stderr
    # Each attempt was refused and said so; the waits (Retry-After: 1) kept it within its 2.5 s deadline.
    attempts = served.refused()
    assert attempts >= 2 and f"(after {attempts} attempts)" in result.stderr


def test_recent_all_at_the_bound_walks_once_a_slot_is_freed(
    one_walk_a_key: Served, big_store: tuple[Path, dict[str, str]], cli: Callable[..., CliResult]
) -> None:
    served, key = one_walk_a_key, big_store[1]["alice"]
    env = {"MNEMO_ENDPOINT": served.url, "MNEMO_API_KEY": key}
    results: list[CliResult] = []
    walking = threading.Thread(target=lambda: results.append(cli("recent", "--all", "--format", "ndjson", env=env)))
    with held_walk(served.port, key):
        walking.start()
        until(lambda: served.refused() > 0, "the walk was never refused while the key was at its bound")
    walking.join(timeout=60)  # the held walk's client is gone: its slot is freed, and a retry gets it
    assert results and results[0].code == 0, results
    ids = [json.loads(line)["atom_id"] for line in results[0].stdout.splitlines()]
    assert len(ids) == len(set(ids)) == ENTRIES
    until(lambda: served.app.state.walks.by_key == {}, "a slot was never given back")
