"""`mnemo recent --follow` over an endpoint (issue 38): pushed by a real `mnemo serve`, polled where there is no channel."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.server.app import create_app
from mnemo_tui.values.writes import WriteRequest
from tests.support.follow import Follower
from tests.support.serve import ServeProcess, start_serve
from tests.support.wire import serving_app

WRITER = """
import sys
from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.values.writes import WriteRequest
backend = RemoteBackend(sys.argv[1], sys.argv[2])
for i in range(int(sys.argv[3])):
    print(backend.write(WriteRequest(f"pushed {sys.argv[4]} {i}", "general")).atom_id, flush=True)
backend.close()
"""


def write(url: str, key: str, count: int, tag: str) -> list[str]:
    """`count` entries written through the endpoint by another process: their acknowledged ids."""
    done = subprocess.run(
        [sys.executable, "-c", WRITER, url, key, str(count), tag], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def keyed_store(home: Path, entries: int = 3) -> tuple[str, list[str]]:
    """MNEMO_HOME's store with a key for `local` and `entries` entries: the key and their ids."""
    store = Store(home / "store.db")
    try:
        key = store.create_key("local")[1]
        ids = [store.write("local", WriteRequest(f"before {i}", "general")).atom_id for i in range(entries)]
    finally:
        store.close()
    return key, ids


def requests(served: ServeProcess, path: str) -> int:
    """How many requests for `path` the server's access log has written so far."""
    return sum(1 for line in list(served.lines) if "mnemo.access" in line and f' {path}" ' in line)


def test_a_write_after_the_follower_started_is_pushed_in_the_one_request_it_makes(isolated_home: Path) -> None:
    key, before = keyed_store(isolated_home)
    served = start_serve(isolated_home)
    try:
        with Follower.of(isolated_home, served.url, key) as follower:
            follower.wait_for(lambda: len(follower.seen) == 3)
            written = follower.wait_printed(write(served.url, key, 5, "a"))
            more = follower.wait_printed(write(served.url, key, 5, "b"))
        assert follower.code == 130, follower.stderr
        # A streamed answer's access line is written when it ends: wait (bounded) for it, then count.
        for _ in range(400):
            if requests(served, "/api/v1/memory/follow"):
                break
            time.sleep(0.05)
    finally:
        served.stop()
    assert follower.seen == before + written + more  # oldest first, each once
    assert requests(served, "/api/v1/memory/follow") == 1
    assert requests(served, "/api/v1/memory/recent") == 0  # nothing polled


@contextmanager
def held_port() -> Iterator[int]:
    """A loopback port held by a socket bound without `listen()` for the block: a client is refused while no
    server runs on it, and no other process is given it meanwhile; each server binds beside it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_a_server_killed_and_restarted_mid_follow_loses_and_repeats_nothing(isolated_home: Path) -> None:
    key, before = keyed_store(isolated_home)
    with held_port() as port:
        served = start_serve(isolated_home, "--port", str(port))
        follower = Follower.of(isolated_home, served.url, key)
        again: ServeProcess | None = None
        try:
            follower.wait_for(lambda: len(follower.seen) == 3)
            first = follower.wait_printed(write(served.url, key, 10, "first"))
            served.proc.send_signal(signal.SIGKILL)
            served.proc.wait(timeout=20)
            # A person hears of the outage while it lasts, not only at its end (on stderr: stdout stays entries).
            follower.wait_for(lambda: "reconnecting" in follower.stderr, "said the stream dropped")
            assert "the follow's stream from " + served.url + " dropped" in follower.stderr
            assert "reconnected" not in follower.stderr
            store = Store(isolated_home / "store.db")  # written while no server runs: read on the reconnect
            try:
                down = [store.write("local", WriteRequest(f"while down {i}", "general")).atom_id for i in range(5)]
            finally:
                store.close()
            again = start_serve(isolated_home, "--port", str(port))
            assert again.url == served.url
            after = follower.wait_printed(write(again.url, key, 10, "after"))
            assert f"the follow reconnected to {served.url}" in follower.stderr
        finally:
            code, stderr = follower.stop()
            if again is not None:
                again.stop()
    assert code == 130, stderr
    assert sorted(follower.seen) == sorted(before + first + down + after)
    assert len(follower.seen) == len(set(follower.seen))


class NoFollow:
    """The real app, but `/memory/follow` answers 404 as the hosted service does; counts the follows asked."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.follows = 0
        self.recents = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/memory/follow"):
            self.follows += 1
            await send(
                {"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": b'{"detail":"Not Found"}'})
            return
        if scope["type"] == "http" and scope["path"].endswith("/memory/recent"):
            self.recents += 1
        await self.app(scope, receive, send)


def test_an_endpoint_without_the_channel_is_polled_without_a_word(isolated_home: Path) -> None:
    key, before = keyed_store(isolated_home)
    app = create_app(isolated_home / "store.db", workers=2)
    wrapped = NoFollow(app)
    with serving_app(app, wrapped) as server, Follower.of(isolated_home, server.url, key) as follower:
        follower.wait_for(lambda: len(follower.seen) == 3)
        written = follower.wait_printed(write(server.url, key, 3, "polled"))
    assert follower.code == 130, follower.stderr
    assert follower.seen == before + written
    assert wrapped.follows == 1  # asked once, then polled
    assert wrapped.recents >= 2  # the first page, then the polls
    assert "follow" not in follower.stderr.lower().replace("--follow", "")  # no word about it


class Counting:
    """The real app, counting follow and recent requests and the heartbeats its streams send."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.follows = 0
        self.recents = 0
        self.heartbeats = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.follows += scope["path"].endswith("/memory/follow")
        self.recents += scope["path"].endswith("/memory/recent")

        async def counted(message: dict[str, Any]) -> None:
            self.heartbeats += message.get("body", b"").count(b"event: heartbeat")
            await send(message)

        await self.app(scope, receive, counted)


def test_heartbeats_print_nothing_and_cost_no_request(isolated_home: Path) -> None:
    key, before = keyed_store(isolated_home)
    app = create_app(isolated_home / "store.db", workers=2, heartbeat_seconds=0.05)
    counting = Counting(app)
    with serving_app(app, counting) as server, Follower.of(isolated_home, server.url, key) as follower:
        follower.wait_for(lambda: len(follower.seen) == 3)
        follower.wait_for(lambda: counting.heartbeats >= 20)
        assert follower.seen == before  # the heartbeats printed nothing
        written = follower.wait_printed(write(server.url, key, 2, "after the beats"))
    assert follower.code == 130, follower.stderr
    assert follower.seen == before + written
    assert counting.follows == 1 and counting.recents == 0
