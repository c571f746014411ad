"""The TUI over an endpoint: the same app on a RemoteBackend against a real `mnemo serve` on loopback."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.backends.remote_consumers import kept_by
from mnemo_tui.catchup.catchup import CatchUp
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.state.statedb import StateDB, StateKey
from mnemo_tui.tui import MnemoApp
from mnemo_tui.values.model import RecentQuery
from tests.support.tui import clock, ids, remote, req, rows, settle
from tests.support.walk import walk_ids
from tests.support.wire import ThreadServer, serving

pytestmark = pytest.mark.anyio
SIZE = (120, 36)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def walk(backend: RemoteBackend, limit: int) -> list[str]:
    return walk_ids(backend, RecentQuery(limit=limit))


async def test_scrolling_an_endpoint_equals_its_cursor_walk_and_live_entries_arrive(
    served: tuple[ThreadServer, LocalBackend, str], state: StateDB
) -> None:
    server, local, key = served
    for i in range(70):
        local.write(req(f"remote entry {i:03d}"))
    backend = remote(server.url, key)
    app = MnemoApp(backend, state, clock=clock, poll_interval=None, page_size=20)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            screen = app.feed_screen
            for _ in range(20):
                if screen.feed.window.at_end:
                    break
                await pilot.press("G")
                await settle(pilot, 2)
            assert screen.feed.window.at_end
            assert ids(rows(app)) == walk(backend, 20)
            await pilot.press("g")
            written = local.write(req("written while the app runs"))
            screen.feed.check_live()  # an endpoint has no probe: it is polled from the newest instant shown
            await settle(pilot)
            assert rows(app)[0].atom_id == written.atom_id  # type: ignore[union-attr]
            assert len(set(ids(rows(app)))) == len(rows(app)) == 71
            screen.feed.check_live()
            await settle(pilot)
            assert len(rows(app)) == 71
    finally:
        backend.close()


async def test_mark_caught_up_on_an_endpoint_commits_what_catchup_commits(
    served: tuple[ThreadServer, LocalBackend, str], state: StateDB
) -> None:
    server, local, key = served
    for i in range(30):
        local.write(req(f"entry {i}"))
    backend = remote(server.url, key)
    app = MnemoApp(backend, state, consumer="tui", clock=clock, poll_interval=None)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert app.feed_screen.scopes.counts["own"] == "30"
            await pilot.press("c")
            await settle(pilot)
            assert app.feed_screen.scopes.counts["own"] == ""
        # On `mnemo serve` both keep the consumer's watermark on the server (docs/consumers.md).
        kept = kept_by(backend, state, lambda text: None)
        CatchUp(backend, kept, consumer="cli", overlap=2_000_000).run(lambda entries: None)
        tui = kept.load(StateKey(server.url, backend.principal, "tui", None))
        cli = kept.load(StateKey(server.url, backend.principal, "cli", None))
    finally:
        backend.close()
    assert tui is not None and cli is not None
    assert (tui.created_at, tui.boundary_ids) == (cli.created_at, cli.boundary_ids)


@pytest.mark.parametrize("from_env", [False, True])
async def test_a_refused_key_is_shown_and_the_app_stays_open_advising_a_restart(
    served: tuple[ThreadServer, LocalBackend, str], state: StateDB, monkeypatch: pytest.MonkeyPatch, from_env: bool
) -> None:
    server, _local, _key = served
    wrong = "mk_live_" + "0" * 32
    if from_env:
        monkeypatch.setenv("MNEMO_API_KEY", wrong)
    backend = remote(server.url, wrong)
    app = MnemoApp(backend, state, clock=clock, poll_interval=None)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            screen = app.feed_screen
            assert screen.switcher.current == "error"
            shown = " ".join(str(screen.error_view.render()).split())
            assert "The key was refused" in shown and app.is_running
            # The open app keeps its key: the advice is to start again, never a retry that sends the same key.
            assert "press r" not in shown and "start mnemo tui again" in shown
            if from_env:
                assert "set MNEMO_API_KEY to the right key (it wins over a key kept by `mnemo login`" in shown
            else:
                assert "keep the right key with `mnemo login` (`mnemo login --insecure-storage`" in shown
            assert wrong not in shown and wrong[8:] not in shown
            await pilot.press("r")  # and indeed: the same key, refused again
            await settle(pilot)
            assert screen.switcher.current == "error"
    finally:
        backend.close()


async def test_an_endpoint_that_comes_up_later_is_read_on_retry(tmp_path: Path, state: StateDB) -> None:
    path = tmp_path / "late.db"
    store = Store(path)
    key = store.create_key("alice")[1]
    LocalBackend(store, "alice").write(req("there all along"))
    # The port stays ours: bound without listen() (refused) while unreachable, then served.
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    backend = remote(f"http://127.0.0.1:{held.getsockname()[1]}/api/v1", key)
    app = MnemoApp(backend, state, clock=clock, poll_interval=None)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            screen = app.feed_screen
            assert screen.switcher.current == "error"
            assert "unreachable" in str(screen.error_view.render())
            from mnemo_tui.server.app import create_app

            with serving(create_app(path, workers=2), sock=held):
                await pilot.press("r")
                await settle(pilot)
                assert screen.switcher.current == "feed"
                assert [e.content for e in rows(app)] == ["there all along"]  # type: ignore[union-attr]
    finally:
        held.close()
        backend.close()
        store.close()
