"""Exactness of the push follow across servers and a kill -9: writers and a deleter on server A, a follower on
server B; B is killed mid-stream and the follower resumes on A with the last `id` it received. Every
acknowledged entry and every removal arrives exactly once, on SQLite (two servers on one store file) and on
PostgreSQL (two servers on one database)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from mnemo_tui.engine.sqlite.store import Store
from tests.support.follow import Stream, client, delete, following, write
from tests.support.serve import ServeProcess, start_serve

WRITERS = 3
WRITES = 40  # per writer


def _servers(tmp_path: Path, where: list[str], store: Path | None) -> list[ServeProcess]:
    servers = []
    for name in ("a", "b"):
        home = tmp_path / name
        home.mkdir()
        if store is not None:  # both serve the one store file
            (home / "config.toml").write_text(f"store = {str(store)!r}\n")
        servers.append(start_serve(home, *where, "--workers", "2"))
    return servers


@pytest.fixture(params=["sqlite", "postgres"])
def two_servers(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    path = tmp_path / "shared.db"
    if request.param == "sqlite":
        store: Any = Store(path)
        where: list[str] = []
    else:
        from mnemo_tui.engine.postgres.store import PgStore

        databases = request.getfixturevalue("pg_databases")
        url = databases.cluster.url(databases.create())
        store = PgStore(url)
        where = ["--database", url, "--database-pooler", "none"]
    key = store.create_key("team")[1]
    store.close()
    servers = _servers(tmp_path, where, path if request.param == "sqlite" else None)
    yield key, servers
    for server in servers:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait(timeout=10)


def test_every_acknowledged_entry_and_removal_arrives_exactly_once_across_a_kill_and_a_resume(
    two_servers: tuple[str, list[ServeProcess]],
) -> None:
    key, (a, b) = two_servers

    async def main() -> None:
        acked: list[str] = []
        removed: list[str] = []
        received: Counter[str] = Counter()
        gone: Counter[str] = Counter()

        def take(stream: Stream, upto: int) -> None:
            for event in stream.events[upto:]:
                (received if event.name == "entries" else gone).update(event.ids)

        async with client() as c:

            async def writer(n: int) -> None:
                for i in range(WRITES):
                    acked.append(await write(c, a.url, key, f"writer {n} entry {i}"))
                    if i % 7 == 3:  # now and then one of the entries written so far is deleted
                        victim = acked[len(acked) // 2]
                        if victim not in removed:
                            removed.append(victim)
                            await delete(c, a.url, key, victim)

            async with following(c, b.url, key) as s:
                start = await s.next()
                assert start is not None and start.ids == [] and start.id is not None
                writers = [asyncio.create_task(writer(n)) for n in range(WRITERS)]
                while sum(len(e.ids) for e in s.events) < 20:  # mid-stream
                    assert await s.next() is not None
                b.proc.send_signal(signal.SIGKILL)
                with contextlib.suppress(httpx.TransportError):  # what was on its way, then the cut
                    while await s.next() is not None:
                        pass
                take(s, 0)
                position = next(e.id for e in reversed(s.events) if e.id is not None)
            async with following(c, a.url, key, last_id=position) as s:
                await asyncio.gather(*writers)
                # An entry deleted before any read of it comes only as its removal.
                left = (set(acked) - set(removed) - set(received)) | (set(removed) - set(gone))
                await s.until(left)
                take(s, 0)
        assert set(received) <= set(acked)
        assert set(received) >= set(acked) - set(removed)  # every entry not deleted meanwhile was delivered
        assert all(count == 1 for count in received.values()), [i for i, n in received.items() if n > 1]
        assert set(gone) == set(removed) and all(count == 1 for count in gone.values())

    asyncio.run(main())
