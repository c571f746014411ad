"""Counts that stay true (issue 58): the sidebar, the feed's `●` and `mnemo catchup --no-commit` agree, and a
write or a pass of another process, into a scope that is not open, moves its count."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.catchup.catchup import CatchUp
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.tui import MnemoApp
from mnemo_tui.tui.screens.main import FeedScreen
from tests.support.cli import CliResult
from tests.support.serve import start_serve
from tests.support.tui import ROOM_OPS, clock, remote, req, sample_store, settle, until
from tests.support.wire import ThreadServer

pytestmark = pytest.mark.anyio
SIZE = (120, 36)
OPS = f"xroom:{ROOM_OPS}"
Cli = Callable[..., CliResult]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def marked(screen: FeedScreen) -> int:
    """How many rows the feed marks `●` (new to the consumer)."""
    feed = screen.feed
    return sum(
        1
        for row in range(feed.window.row_count)
        if (e := feed.window.entry(row)) is not None and feed.unread.is_new(e.created_at, e.atom_id)
    )


def on_store(store: Store, state: StateDB) -> dict[str, str]:
    """The environment that points the CLI at the test's store and state database."""
    return {"MNEMO_STORE": str(store.path), "MNEMO_STATE": str(state.path), "MNEMO_PRINCIPAL": "local"}


def cli_new(cli: Cli, env: dict[str, str], scope: str | None) -> int:
    """What `mnemo catchup --no-commit` says is new in a scope (its NDJSON lines)."""
    flags = ["--scope", scope] if scope else []
    done = cli("catchup", *flags, "--no-commit", "--format", "ndjson", env=env)
    assert done.code == 0, done.stderr
    return len(done.stdout.splitlines())


def cli_mark(cli: Cli, env: dict[str, str], scope: str) -> object:
    done = cli("watermark", "show", "--scope", scope, "--format", "json", env=env)
    assert done.code == 0, done.stderr
    return json.loads(done.stdout)


async def test_a_write_of_another_process_into_a_scope_not_open_moves_its_count(
    store: Store, local: LocalBackend, state: StateDB, cli: Cli
) -> None:
    sample_store(store)
    env = on_store(store, state)
    app = MnemoApp(local, state, clock=clock, poll_interval=0.05, scope="research")
    async with app.run_test(size=SIZE) as pilot:
        screen = app.feed_screen
        counts = screen.scopes.counts
        await until(pilot, lambda: counts.get(f"s:{OPS}") == "2" and counts.get("s:build") == "3")
        assert cli("write", "the deploy moved again", "--scope", OPS, env=env).code == 0
        await until(pilot, lambda: counts.get(f"s:{OPS}") == "3")  # a room not open, written by another process
        assert cli("write", "a build elsewhere", "--scope", "build", env=env).code == 0
        await until(pilot, lambda: counts.get("s:build") == "4" and counts.get("own") == "10")
        assert screen.scope == "research" and counts["s:research"] == "2"


async def test_after_c_on_the_own_store_the_sidebar_the_feed_and_catchup_agree(
    store: Store, local: LocalBackend, state: StateDB, cli: Cli
) -> None:
    sample_store(store)
    env = on_store(store, state)
    app = MnemoApp(local, state, clock=clock, poll_interval=None, pin_notices=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        await pilot.press("c")
        await settle(pilot)
        counts = screen.scopes.counts
        assert counts["own"] == "" and marked(screen) == 0 == cli_new(cli, env, None)
        # Each domain keeps its own watermark (as `mnemo catchup --scope build` reads it): not blank.
        assert counts["s:build"] == str(cli_new(cli, env, "build")) == "3"
        assert counts["s:general"] == str(cli_new(cli, env, "general")) == "4"
        await pilot.press("2")  # opens `build`
        await settle(pilot)
        assert screen.scope == "build" and marked(screen) == 3
        assert cli_mark(cli, env, "build") is None and "no watermark yet" in str(screen.status.render())


async def test_a_catchup_of_another_process_moves_the_count_and_the_marks_of_the_open_scope(
    store: Store, local: LocalBackend, state: StateDB, cli: Cli
) -> None:
    sample_store(store)
    env = on_store(store, state)
    app = MnemoApp(local, state, clock=clock, poll_interval=0.05, scope="build")
    async with app.run_test(size=SIZE) as pilot:
        screen = app.feed_screen
        counts = screen.scopes.counts
        await until(pilot, lambda: counts.get("s:build") == "3" and marked(screen) == 3)
        assert cli("catchup", "--scope", "build", "--format", "ndjson", env=env).code == 0
        await until(pilot, lambda: counts.get("s:build") == "" and marked(screen) == 0)
        assert counts["own"] == "9" == str(cli_new(cli, env, None))
        assert "since watermark" in str(screen.status.render())


async def check_served(url: str, key: str, local: LocalBackend, tmp_path: Path) -> None:
    room = local.create_room("ops")
    for i in range(2):
        local.write(req(f"room entry {i}", room.address))
    local.write(req("in build", "build"))
    state = StateDB(tmp_path / "state.db")
    backend, other = remote(url, key), remote(url, key)
    CatchUp(backend, state, consumer="default", scope=room.address).run(lambda entries: None, commit=True)
    app = MnemoApp(backend, state, clock=clock, poll_interval=0.05, scope=room.address)
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = app.feed_screen
            counts = screen.scopes.counts
            key_room = f"s:{room.address}"
            await until(
                pilot, lambda: screen.feed.pushing and counts.get(key_room) == "" and counts.get("s:build") == "1"
            )
            other.write(req("pushed into the open room", room.address))
            # The open room's count follows its pushed row at once, and agrees with its `●`.
            await until(pilot, lambda: counts.get(key_room) == "1" and marked(screen) == 1)
            other.write(req("another build", "build"))  # not open: counted again by the timer
            await until(pilot, lambda: counts.get("s:build") == "2" and counts.get("own") == "2")
            walk = CatchUp(backend, state, consumer="default", scope=room.address).run(lambda e: None, commit=False)
            assert walk.delivered == 1 and counts[key_room] == "1"
    finally:
        backend.close()
        other.close()
        state.close()


async def test_counts_and_marks_follow_a_served_room_and_a_scope_not_open(
    served: tuple[ThreadServer, LocalBackend, str], tmp_path: Path
) -> None:
    server, local, key = served
    await check_served(server.url, key, local, tmp_path)


async def test_counts_and_marks_follow_a_room_of_a_mnemo_serve_process(tmp_path: Path) -> None:
    home = tmp_path / "serve"
    home.mkdir()
    store = Store(home / "store.db")
    key = store.create_key("alice")[1]
    process = start_serve(home, store=home / "store.db")
    try:
        await check_served(process.url, key, LocalBackend(store, "alice"), tmp_path)
    finally:
        process.stop()
        store.close()
