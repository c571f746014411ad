"""The TUI's live feed pushed by a real `mnemo serve` (issue 38): no timer poll, writes and deletes elsewhere shown."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.server.app import create_app
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.tui import MnemoApp
from tests.support.tui import clock, ids, remote, req, rows, settle, until
from tests.support.wire import ThreadServer

pytestmark = pytest.mark.anyio
SIZE = (120, 36)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def followers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "mnemo-follow" and t.is_alive()]


async def test_a_write_elsewhere_is_pushed_without_a_poll_and_a_delete_drops_its_row(
    served: tuple[ThreadServer, LocalBackend, str], state: StateDB
) -> None:
    server, local, key = served
    before = [local.write(req(f"entry {i}")).atom_id for i in range(5)]
    backend, other = remote(server.url, key), remote(server.url, key)
    app = MnemoApp(backend, state, clock=clock, poll_interval=None, page_size=20)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            feed = app.feed_screen.feed
            await until(pilot, lambda: feed.pushing)  # the follow's first event is in
            assert len(followers()) == 1
            await until(pilot, lambda: str(app.feed_screen.status.render()).strip().endswith("· live (pushed)"))
            written = other.write(req("written elsewhere")).atom_id
            await until(pilot, lambda: bool(rows(app)) and ids(rows(app))[0] == written)
            assert ids(rows(app)) == [written, *reversed(before)]
            assert other.delete(before[2]) == 1
            await until(pilot, lambda: before[2] not in ids(rows(app)))
            assert ids(rows(app)) == [written, before[4], before[3], before[1], before[0]]
            assert feed.live_error is None

            app.feed_screen.open_scope("general")  # another scope: the old stream is closed, a new one opened
            await until(pilot, lambda: feed.scope == "general" and feed.pushing and len(followers()) == 1)
            again = other.write(req("in general")).atom_id
            await until(pilot, lambda: bool(rows(app)) and ids(rows(app))[0] == again)
            assert len(set(ids(rows(app)))) == len(rows(app)) == 6
        for _ in range(500):  # the app closed: its stream's thread ends (bounded), none left behind
            if not followers():
                break
            threading.Event().wait(0.02)
        assert followers() == []
    finally:
        backend.close()
        other.close()


async def test_an_endpoint_without_the_channel_is_polled_by_the_timer(
    served: tuple[ThreadServer, LocalBackend, str], state: StateDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, local, key = served
    local.write(req("first"))
    backend = remote(server.url, key)
    monkeypatch.setattr(RemoteBackend, "_offers_follow", False)  # as the hosted service: follow() is None
    app = MnemoApp(backend, state, clock=clock, poll_interval=0.05, page_size=20)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            written = local.write(req("polled in")).atom_id
            await until(pilot, lambda: bool(rows(app)) and ids(rows(app))[0] == written)
            feed = app.feed_screen.feed
            assert not feed.pushing and not feed.offers_push and followers() == []
            assert str(app.feed_screen.status.render()).strip().endswith("· live")
    finally:
        backend.close()


async def test_a_stream_that_drops_says_reconnecting_at_once_and_live_pushed_once_back(
    tmp_path: Path, state: StateDB
) -> None:
    path = tmp_path / "served.db"
    store = Store(path)
    key = store.create_key("alice")[1]
    local = LocalBackend(store, "alice")
    local.write(req("before the outage"))
    first = create_app(path)
    server = ThreadServer(first, as_serve=True).start()
    try:
        port = server.port
        # Reconnects from 50 ms apart, for a deadline much longer than the test: only the status can tell.
        backend = RemoteBackend(server.url, key, retries=1, backoff=0.05, max_wait=0.5, deadline=120)
        app = MnemoApp(backend, state, clock=clock, poll_interval=None, page_size=20)
        try:
            async with app.run_test(size=SIZE) as pilot:
                await settle(pilot)
                screen = app.feed_screen
                status = lambda: str(screen.status.render()).strip()  # noqa: E731
                await until(pilot, lambda: status().endswith("· live (pushed)"))
                server.stop()  # the server stops as `mnemo serve` does: its stream ends, every reconnect is refused
                await until(pilot, lambda: status().endswith("· reconnecting…"))
                assert screen.feed.live_error is None and len(followers()) == 1  # the same follow, still trying
                during = local.write(req("written while the server was down")).atom_id
                again = create_app(path)
                back = ThreadServer(again, port, as_serve=True).start()  # back on the same port
                try:
                    await until(pilot, lambda: bool(rows(app)) and ids(rows(app))[0] == during)
                    await until(pilot, lambda: status().endswith("· live (pushed)"))
                finally:
                    back.stop()
                    again.state.pool.close()
                    again.state.health.close()
        finally:
            backend.close()
    finally:
        server.stop()
        first.state.pool.close()
        first.state.health.close()
        store.close()
