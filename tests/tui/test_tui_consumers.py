"""The TUI's "new since last review" on `mnemo serve` is the server's consumer: a review (`c`) on one machine is
seen on another (docs/consumers.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.tui import MnemoApp
from tests.support.tui import clock, remote, req, settle
from tests.support.wire import ThreadServer

pytestmark = pytest.mark.anyio
SIZE = (120, 36)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_review_on_one_machine_is_seen_on_another(
    served: tuple[ThreadServer, LocalBackend, str], tmp_path: Path
) -> None:
    server, local, key = served
    for i in range(5):
        local.write(req(f"entry {i}"))
    machines = [StateDB(tmp_path / "laptop.db"), StateDB(tmp_path / "desktop.db")]
    backend = remote(server.url, key)
    try:
        app = MnemoApp(backend, machines[0], consumer="review", clock=clock, poll_interval=None)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert app.feed_screen.scopes.counts["own"] == "5"
            await pilot.press("c")
            await settle(pilot)
            assert app.feed_screen.scopes.counts["own"] == ""
        local.write(req("written after the review"))
        other = MnemoApp(backend, machines[1], consumer="review", clock=clock, poll_interval=None)
        async with other.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert other.feed_screen.scopes.counts["own"] == "1"  # only what came after the laptop's review
    finally:
        backend.close()
        for state in machines:
            state.close()
