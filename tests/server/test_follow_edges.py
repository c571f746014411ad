"""Push follow hardening (review of issue 38): a Last-Event-ID past 64 bits, a write racing the first
position read, a revoked key, and clients that stop reading (docs/server.md, "Push follow")."""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.server import follow as follow_module
from mnemo_tui.server import streamed, wake
from mnemo_tui.server.app import create_app
from mnemo_tui.values.writes import WriteRequest
from tests.support.follow import client, following, write
from tests.support.serve import start_serve
from tests.support.wire import serving


@contextmanager
def served(tmp_path: Path, **options: Any) -> Iterator[tuple[str, dict[str, str], Path]]:
    path = tmp_path / "served.db"
    store = Store(path)
    keys = {p: store.create_key(p)[1] for p in ("alice", "bob")}
    store.close()
    with serving(create_app(path, **options)) as server:
        yield server.url, keys, path


def run(main: Callable[[], Any]) -> Any:
    return asyncio.run(main())


def new_key(path: Path) -> tuple[str, str]:
    """A new API key of alice on the served store: its id and the key."""
    with closing(Store(path, create=False)) as store:
        return store.create_key("alice")


def revoke(path: Path, key_id: str) -> None:
    """Revoke the key `key_id` in the served store itself, not through the server."""
    with closing(Store(path, create=False)) as store:
        store.revoke_key(key_id)


def test_a_last_event_id_past_a_signed_64_bit_integer_is_refused_with_422(tmp_path: Path) -> None:
    with served(tmp_path) as (url, keys, _):

        async def main() -> None:
            async with client() as c:
                for last_id in (2**63, 10**19 - 1):
                    async with following(c, url, keys["alice"], {}, last_id) as s:
                        raw = await s.response.aread()
                        assert s.response.status_code == 422, raw
                        assert b'"code"' in raw and b"INTERNAL" not in raw
                async with following(c, url, keys["alice"], {}, 2**63 - 1) as s:  # the largest position is one
                    assert s.response.status_code == 200

        run(main)


def test_a_write_committed_between_the_first_position_read_and_the_stream_start_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No probe rescues a lost wake-up here: only the write's own wake-up can deliver it.
    monkeypatch.setattr(wake, "SQLITE_PROBE_SECONDS", 3600.0)
    original = follow_module.Follow.position
    written: list[str] = []
    path_box: list[Path] = []

    async def racing(self: follow_module.Follow) -> tuple[int, bool]:
        found = await original(self)
        if not written:  # the handler's read: a write commits after it and wakes the hub at once

            def commit() -> str:
                store = Store(path_box[0], create=False)
                try:
                    return store.write("alice", WriteRequest(content="raced")).atom_id
                finally:
                    store.close()

            written.append(await asyncio.to_thread(commit))
            self.hub.written()
        return found

    monkeypatch.setattr(follow_module.Follow, "position", racing)
    with served(tmp_path, heartbeat_seconds=3600.0) as (url, keys, path):
        path_box.append(path)

        async def main() -> None:
            async with client() as c, following(c, url, keys["alice"]) as s:
                first = await s.next()
                assert first is not None and written and written[0] not in first.ids
                (woken,) = await s.until({written[0]}, wait=10.0)
                assert woken.ids == [written[0]]

        run(main)


def test_a_key_revoked_while_it_follows_gets_no_more_entries_and_its_stream_ends_with_401(tmp_path: Path) -> None:
    with served(tmp_path) as (url, keys, path):
        revoked_id, revoked = new_key(path)

        async def main() -> None:
            async with client() as c, following(c, url, revoked) as s:
                assert (await s.next()) is not None
                before = await write(c, url, keys["alice"], "before revocation")
                await s.until({before})
                revoke(path, revoked_id)
                secret = await write(c, url, keys["alice"], "secret after revocation")
                last = await s.next()
                assert last is not None and last.name == "error", last
                assert last.data["error"]["status"] == 401 and last.data["error"]["code"] == "UNAUTHORIZED"
                assert last.data["error"]["details"]["reason"] == "revoked_key"
                assert secret not in last.ids
                assert (await s.next()) is None  # the stream ended

        run(main)


def test_a_revoked_key_is_told_on_its_next_heartbeat(tmp_path: Path) -> None:
    with served(tmp_path, heartbeat_seconds=0.2) as (url, _keys, path):
        revoked_id, revoked = new_key(path)

        async def main() -> None:
            async with client() as c, following(c, url, revoked) as s:
                assert (await s.next()) is not None
                revoke(path, revoked_id)
                for _ in range(50):  # the first heartbeat after the revocation ends it; a few may be in flight
                    found = await s.next()
                    if found is None or found.name != "heartbeat":
                        break
                assert found is not None and found.name == "error" and found.data["error"]["status"] == 401

        run(main)


def stalled_follow(base: str, key: str, route: str = "/memory/follow", extra: str = "") -> socket.socket:
    """A stream whose client never reads past the answer's head: a tiny receive window, nothing read."""
    host, port = base.split("//")[1].split("/")[0].split(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    path = "/" + base.split("//")[1].split("/", 1)[1] + route
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: x\r\nX-Api-Key: {key}\r\n{extra}Content-Type: application/json\r\n"
        "Content-Length: 2\r\n\r\n{}".encode()
    )
    return sock


def test_a_follow_whose_client_stopped_reading_ends_at_the_write_deadline_and_frees_its_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streamed, "WRITE_DEADLINE", 0.5)
    path = tmp_path / "served.db"
    store = Store(path)
    key = store.create_key("alice")[1]
    store.close()
    app = create_app(path)
    with serving(app) as server:
        sock = stalled_follow(server.url, key)
        try:

            async def main() -> None:
                async with client() as c:
                    big = "x" * 9_900
                    for n in range(3000):  # until the stalled stream is dropped (its buffers hold a few MB)
                        if app.state.follows.open == 0 and n > 0:
                            break
                        await write(c, server.url, key, f"{n} {big}")
                    assert app.state.follows.open == 0  # the slot was given back
                    async with following(c, server.url, key) as s:  # and the server still serves
                        assert (await s.next()) is not None

            run(main)
            sock.settimeout(20)
            while sock.recv(1 << 20):  # what was buffered, then the close
                pass
        finally:
            sock.close()


def test_sigterm_ends_follows_and_walks_whose_clients_do_not_read_without_a_traceback(
    isolated_home: Path, cli: Any
) -> None:
    key = cli("keys", "create", "alice").stdout.strip()
    process = start_serve(isolated_home)
    socks: list[socket.socket] = []
    try:

        async def main() -> None:
            async with client() as c:
                big = "y" * 9_900
                for n in range(400):
                    await write(c, process.url, key, f"{n} {big}")
                socks.extend(stalled_follow(process.url, key) for _ in range(3))
                # and a streamed walk, its pages never read
                socks.append(stalled_follow(process.url, key, "/memory/recent", "Accept: application/x-ndjson\r\n"))
                for n in range(600):  # the follows' buffers fill: their writes now wait on their clients
                    await write(c, process.url, key, f"more {n} {big}")

        asyncio.run(main())
        process.proc.send_signal(signal.SIGTERM)
        assert process.proc.wait(timeout=30) == 0
    finally:
        if process.proc.poll() is None:
            process.proc.kill()
            process.proc.wait(timeout=10)
        for sock in socks:
            sock.close()
    log = "".join(process.lines)
    assert "mnemo serve: stopped" in log and "without completing response" not in log, log
    assert "Traceback" not in log and "Exception in ASGI application" not in log, log
    assert "timeout graceful shutdown exceeded" not in log, log  # every stream ended before uvicorn's wait ran out
