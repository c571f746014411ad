"""Faults between the remote backend and a real `mnemo serve`: transient answers, a dying server, a late commit."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mnemo_tui import timefmt
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.backends.remote_calls import key_principal
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.server.app import create_app
from mnemo_tui.state.statedb import StateDB, StateKey
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.walk import walk_ids
from tests.support.wire import LateClock, ThreadServer, read_body, serving, without_accept

Receive = Callable[[], Any]


class Faults:
    """Wraps the real app: answers chosen `/memory/recent` requests itself, or dies on one, recording bodies."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.recent_bodies: list[dict[str, Any]] = []
        self.answers: dict[int, tuple[int, dict[str, Any], dict[str, str]]] = {}
        self.die_on: int | None = None
        self.server: ThreadServer | None = None

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/memory/recent"):
            await self.app(scope, receive, send)
            return
        scope = without_accept(scope)  # pages of JSON, a request each (the streamed walk: test_stream_walk.py)
        raw = await read_body(receive)
        self.recent_bodies.append(json.loads(raw))
        n = len(self.recent_bodies)
        if n == self.die_on:
            assert self.server is not None
            self.server.server.should_exit = True
            await asyncio.Event().wait()  # never answers: the shutdown cuts the connection
        if n in self.answers:
            status, body, headers = self.answers[n]
            head = [(b"content-type", b"application/json"), *((k.encode(), v.encode()) for k, v in headers.items())]
            await send({"type": "http.response.start", "status": status, "headers": head})
            await send({"type": "http.response.body", "body": json.dumps(body).encode()})
            return
        replayed = [False]

        async def replay() -> dict[str, Any]:
            if not replayed[0]:
                replayed[0] = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()  # type: ignore[no-any-return]

        await self.app(scope, replay, send)


def seeded(path: Path, n: int, principal: str = "alice") -> tuple[Store, str, list[str]]:
    store = Store(path)
    _key_id, key = store.create_key(principal)
    local = LocalBackend(store, principal)
    ids = [local.write(WriteRequest(content=f"entry {i}")).atom_id for i in range(n)]
    return store, key, list(reversed(ids))


def unavailable(retryable: bool = True) -> dict[str, Any]:
    return {"code": "UNAVAILABLE", "message": "busy", "requestId": None, "retryable": retryable, "details": None}


def test_503_then_429_then_200_mid_walk_retries_the_same_cursor_without_skip_or_repeat(tmp_path: Path) -> None:
    path = tmp_path / "served.db"
    store, key, newest_first = seeded(path, 25)
    faults = Faults(create_app(path, workers=2))
    faults.answers[2] = (503, unavailable(), {})
    limited = {"code": "RATE_LIMITED", "message": "slow down", "requestId": None, "retryable": True, "details": None}
    faults.answers[3] = (429, limited, {"Retry-After": "2"})
    sleeps: list[float] = []
    with serving(faults) as server:
        backend = RemoteBackend(server.url, key, sleep=sleeps.append)
        seen = walk_ids(backend, RecentQuery(limit=10))
        backend.close()
    store.close()
    assert seen == newest_first
    cursors = [body.get("cursor") for body in faults.recent_bodies]
    assert len(cursors) == 5
    assert cursors[0] is None and cursors[1] is not None
    assert cursors[1] == cursors[2] == cursors[3] != cursors[4]
    assert len(sleeps) == 2 and sleeps[1] == 2.0


def test_a_retryable_flag_alone_makes_an_answer_transient(tmp_path: Path) -> None:
    path = tmp_path / "served.db"
    store, key, newest_first = seeded(path, 3)
    faults = Faults(create_app(path, workers=2))
    faults.answers[1] = (409, {**unavailable(), "code": "CONFLICT"}, {})
    sleeps: list[float] = []
    with serving(faults) as server:
        backend = RemoteBackend(server.url, key, sleep=sleeps.append)
        assert [e.atom_id for e in backend.recent(RecentQuery()).items] == newest_first
        backend.close()
    store.close()
    assert len(sleeps) == 1


def test_the_server_dying_mid_walk_exits_5_and_leaves_the_watermark(
    tmp_path: Path, cli: Any, isolated_home: Path
) -> None:
    path = tmp_path / "served.db"
    store, key, first_ids = seeded(path, 5)
    faults = Faults(create_app(path, workers=2))
    # The watermark is kept per endpoint URL, so the server comes back on the same port. A socket bound
    # to it (never listening, so a client is refused while no server runs) holds the port from start
    # to end: no other process is given it in between, and each server binds it beside (SO_REUSEADDR).
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    held.bind(("127.0.0.1", 0))
    port = held.getsockname()[1]
    with held:
        with serving(faults, port=port) as server:
            faults.server = server
            # The local watermark's path (a server's consumer: tests/cli/test_consumers_cli.py).
            env = {"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": key, "MNEMO_WATERMARKS": "local"}
            first = cli("catchup", "--format", "json", env=env)
            assert first.code == 0, first.stderr
            assert [i["atom_id"] for i in json.loads(first.stdout)["items"]] == first_ids
            state = StateDB(isolated_home / "state.db")
            before = state.load(StateKey(server.url, key_principal(key), "default", None))
            state.close()
            assert before is not None and first_ids[0] in before.boundary_ids
            local = LocalBackend(store, "alice")
            later = list(reversed([local.write(WriteRequest(content=f"later {i}")).atom_id for i in range(30)]))
            faults.die_on = len(faults.recent_bodies) + 2  # the second page of the next walk never comes
            broken = cli("catchup", "--limit", "10", "--format", "ndjson", env=env)
        assert broken.code == 5, broken.stderr
        assert "cannot reach" in broken.stderr and key not in broken.stderr
        assert len(broken.stdout.splitlines()) == 10  # the first page was printed, then the server died
        state = StateDB(isolated_home / "state.db")
        mark = state.load(StateKey(server.url, key_principal(key), "default", None))
        state.close()
        assert mark == before
        # Back up on the same address: the next pass re-reads from the old watermark and loses nothing.
        with serving(create_app(path, workers=2), port=port) as again:
            assert again.url == server.url
            rerun = cli("catchup", "--format", "json", env=env)
    store.close()
    assert rerun.code == 0, rerun.stderr
    assert [i["atom_id"] for i in json.loads(rerun.stdout)["items"]] == later


def test_a_late_commit_just_below_the_watermark_is_not_lost_with_the_default_overlap(cli: Any) -> None:
    clock = LateClock()
    base = timefmt.now_us() - 60_000_000
    a, b, c, d = (f"{n:08d}-0000-4000-8000-000000000000" for n in (1, 2, 3, 4))
    clock.add(base, a)
    clock.add(base + 1_000_000, b)
    with serving(clock) as server:
        # A fake endpoint that answers the feed only: watermarks local.
        env = {"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": "mk_live_" + "1" * 32, "MNEMO_WATERMARKS": "local"}

        def catchup(*extra: str) -> list[str]:
            result = cli("catchup", "--format", "json", *extra, env=env)
            assert result.code == 0, result.stderr
            return [i["atom_id"] for i in json.loads(result.stdout)["items"]]

        assert catchup() == [b, a]
        assert catchup("--consumer", "blind", "--overlap", "0") == [b, a]
        # A transaction that took its time half a second before b commits only now, beside a new entry.
        clock.add(base + 500_000, c)
        clock.add(base + 2_000_000, d)
        assert catchup() == [d, c]
        assert catchup("--consumer", "blind", "--overlap", "0") == [d]  # without the overlap, c is lost
        assert catchup() == []


def _resolver_says(monkeypatch: Any, code: int) -> list[str]:
    """Every host name lookup answers the resolver's error `code`; returns the names looked up."""
    asked: list[str] = []

    def lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(str(host))
        raise socket.gaierror(code, "resolver says no")

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    return asked


def test_a_host_name_that_does_not_resolve_is_not_asked_again(monkeypatch: Any) -> None:
    import pytest

    from mnemo_tui.errors import Unavailable

    asked = _resolver_says(monkeypatch, socket.EAI_NONAME)
    sleeps: list[float] = []
    backend = RemoteBackend("http://nosuchhost.invalid/api/v1", "mk_live_" + "1" * 32, sleep=sleeps.append)
    try:
        with pytest.raises(Unavailable, match=r"host name not found\); not asked again"):
            backend.recent(RecentQuery())
        with pytest.raises(Unavailable, match=r"host name not found\); not asked again"):
            backend.follow(RecentQuery())  # the push follow's first ask, too
    finally:
        backend.close()
    assert sleeps == [] and len(asked) == 2


def test_a_resolver_that_says_try_again_is_asked_again(monkeypatch: Any) -> None:
    import pytest

    from mnemo_tui.errors import Unavailable

    asked = _resolver_says(monkeypatch, socket.EAI_AGAIN)  # no DNS server reached: a network blip, not a typo
    sleeps: list[float] = []
    backend = RemoteBackend("http://flaky.example/api/v1", "mk_live_" + "1" * 32, retries=2, sleep=sleeps.append)
    try:
        with pytest.raises(Unavailable, match=r"after 3 attempt\(s\)"):
            backend.recent(RecentQuery())
    finally:
        backend.close()
    assert len(sleeps) == 2 and len(asked) == 3
