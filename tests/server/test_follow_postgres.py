"""Push follows over PostgreSQL: a write on one server wakes a follower on another through LISTEN/NOTIFY, and
behind pgbouncer in transaction mode (no LISTEN there) the slow poll of the change token still delivers."""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui.engine.postgres.store import PgStore
from mnemo_tui.server import wake
from mnemo_tui.server.app import App, create_app
from tests.support import pg
from tests.support.follow import client, delete, following, write
from tests.support.serve import ServeProcess, start_serve
from tests.support.wire import serving

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # starlette's note about httpx2: the test client works as it is
    from starlette.testclient import TestClient


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


@pytest.mark.parametrize(
    ("pooler", "writes"),
    [("transaction", True), ("none", True), ("none", False)],
    ids=["behind-a-pooler", "listening", "closed-while-listen-connects"],
)
def test_no_connection_of_the_app_outlives_its_close(pg_databases: Any, pooler: str, writes: bool) -> None:
    """Every connection the app opened (its engines', LISTEN's, its NOTIFYs') is closed once its lifespan
    has ended, even one a request answered just before or a follower's LISTEN was opening: a connection
    left open holds its server process, and one left halfway through its authentication holds every DROP
    DATABASE of the cluster for a minute (`authentication_timeout`). Counted from this process's side:
    such a connection is not in the server's `pg_stat_activity`."""
    url = pg_databases.cluster.url(pg_databases.create())
    key = _key(url)  # its engine closed: its pool with it
    port = pg_databases.cluster.port
    before = pg.client_sockets(port)
    app = create_app(database=url, pooled=pooler == "transaction", workers=2)
    assert isinstance(app, App)
    hub, listener = app.state.hub, app.state.hub.listener
    assert listener is not None and listener.listen == (pooler == "none")
    headers = {"X-Api-Key": key}
    with TestClient(app, raise_server_exceptions=False) as served:
        assert served.portal is not None

        async def join() -> None:
            hub.join()  # a follower: LISTEN begins, unless behind a transaction pooler

        served.portal.call(join)
        if writes:
            for _ in range(400):  # LISTEN is issued as the follower joins: wait until it listens
                if listener.listening == listener.listen:
                    break
                threading.Event().wait(0.05)
            assert listener.listening == listener.listen
            written = served.post("/api/v1/memory/write", json={"content": "kept"}, headers=headers)
            assert written.status_code == 200, written.text
            # A POST to /memory/write wakes the other servers even when refused: a NOTIFY is under way as it closes.
            assert served.post("/api/v1/memory/write", json={}, headers=headers).status_code == 422
    left = pg.client_sockets(port) - before
    assert not left, f"{len(left)} connection(s) of the app still open after its close"
