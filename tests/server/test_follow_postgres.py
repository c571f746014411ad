"""Push follows over PostgreSQL: a write on one server wakes a follower on another through LISTEN/NOTIFY, and
behind pgbouncer in transaction mode (no LISTEN there) the slow poll of the change token still delivers."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from follow_helpers import client, delete, following, write
from serve_process import ServeProcess, start_serve
from wire_servers import serving

from mnemo_tui.engine.postgres import PgStore
from mnemo_tui.server import wake
from mnemo_tui.server.app import App, create_app


def _key(url: str) -> str:
    admin = PgStore(url)
    try:
        return admin.create_key("team")[1]
    finally:
        admin.close()


@contextmanager
def other_server(home: Path, url: str, *args: str) -> Iterator[ServeProcess]:
    home.mkdir()
    process = start_serve(home, "--database", url, "--workers", "2", *args)
    try:
        yield process
    finally:
        if process.proc.poll() is None:
            process.stop()


def test_a_write_on_one_server_wakes_a_follower_on_another_through_notify(
    pg_databases: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = pg_databases.cluster.url(pg_databases.create())
    key = _key(url)
    # The follower's server polls once an hour: only a notification can wake it within the test's wait.
    monkeypatch.setattr(wake, "PG_POLL_SECONDS", 3600.0)
    app = create_app(database=url, pooled=False, workers=2)
    assert isinstance(app, App) and app.state.hub.listener is not None and app.state.hub.listener.listen
    with serving(app) as b, other_server(tmp_path / "a", url, "--database-pooler", "none") as a:

        async def main() -> None:
            async with client() as c, following(c, b.url, key) as s:
                start = await s.next()
                assert start is not None and start.ids == []
                listener = app.state.hub.listener
                assert listener is not None
                for _ in range(400):  # LISTEN is issued as the first follower joins: wait until it listens
                    if listener.listening:
                        break
                    await asyncio.sleep(0.05)
                assert listener.listening
                first = await write(c, a.url, key, "written on server A")
                (woken,) = await s.until({first})
                assert woken.ids == [first]
                await delete(c, a.url, key, first)
                (removed,) = await s.until({first})
                assert removed.name == "removed" and woken.id is not None and removed.id is not None
                assert removed.id > woken.id
                assert listener.heard >= 2  # the notifications woke it (its own poll waits an hour)

        asyncio.run(main())


def test_behind_pgbouncer_in_transaction_mode_the_slow_poll_still_delivers(
    pg_databases: Any, pg_bouncer: Any, tmp_path: Path
) -> None:
    url = pg_bouncer.url(pg_databases.create())
    key = _key(url)
    app = create_app(database=url, pooled=True, workers=2)
    listener = app.state.hub.listener
    assert listener is not None and not listener.listen  # LISTEN is not even tried behind a transaction pooler
    with serving(app) as b, other_server(tmp_path / "a", url) as a:

        async def main() -> None:
            async with client() as c, following(c, b.url, key) as s:
                start = await s.next()
                assert start is not None
                written = [await write(c, a.url, key, f"through the bouncer {n}") for n in range(3)]
                got = await s.until(set(written))
                delivered = [i for e in got for i in e.ids]
                assert sorted(delivered) == sorted(written) and len(delivered) == 3  # each once
                assert listener.heard == 0

        asyncio.run(main())
