"""`mnemo serve` over PostgreSQL behind pgbouncer in transaction mode (issue 41): session state does not survive
there (a server connection serves another client's next transaction), so nothing of mnemo's may rely on it.

Two servers behind one pgbouncer, five writers and four readers at once (two page walkers, a catch-up consumer,
`mnemo recent --follow`): no answer is a 5xx, every acknowledged write is stored once and reaches every reader
once. The contract suite runs behind pgbouncer as well (tests/contract/test_contract.py, `remote-bouncer`).
"""

from __future__ import annotations

import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.catchup.catchup import CatchUp
from mnemo_tui.engine.postgres.store import PgStore
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.follow import Follower
from tests.support.serve import ServeProcess, servers_over_database, start_writers

pytestmark = pytest.mark.slow

WRITERS = 5
WRITES = 30  # per writer
SERVER_ERROR = re.compile(r'"(?:GET|POST|DELETE) [^"]*" 5\d\d ')

# A writer: WRITES entries, each answered 200 at the first try (a 5xx is the failure this test is for); prints
# every acknowledged id.
WRITER = """
import sys, httpx
url, key, name, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with httpx.Client(base_url=url, headers={"X-Api-Key": key}, timeout=60) as c:
    for i in range(count):
        r = c.post("/memory/write", json={"content": f"{name} {i}", "domain": f"d{i % 3}"})
        assert r.status_code == 200, (r.status_code, r.text)
        print(r.json()["atom_id"], flush=True)
"""


@pytest.fixture
def behind_bouncer(pg_databases: Any, pg_bouncer: Any, tmp_path: Path) -> Iterator[tuple[str, str, list[ServeProcess]]]:
    url = pg_bouncer.url(pg_databases.create())
    with servers_over_database(url, tmp_path, 2) as (key, servers):
        yield url, key, servers


def walk(base: str, key: str) -> list[str]:
    """One walk of the feed, page by page (limit 7), every answer a 200."""
    seen: list[str] = []
    cursor = None
    with httpx.Client(base_url=base, headers={"X-Api-Key": key}, timeout=60) as c:
        for _ in range(1000):  # bounded: at most 150 entries, 7 a page
            r = c.post("/memory/recent", json={"limit": 7, "cursor": cursor})
            assert r.status_code == 200, (r.status_code, r.text)
            body = r.json()
            seen += [item["atom_id"] for item in body["items"]]
            cursor = body.get("next_cursor") or None
            if cursor is None:
                return seen
    raise AssertionError("a walk did not end")


def test_writers_and_readers_through_two_servers_behind_pgbouncer(
    behind_bouncer: tuple[str, str, list[ServeProcess]], tmp_path: Path
) -> None:
    url, key, servers = behind_bouncer
    # The follower prints the newest page, then follows: it must be following before the writers start, or
    # what they wrote before its first answer lies below that page. A first entry, printed, says it is.
    with httpx.Client(base_url=servers[0].url, headers={"X-Api-Key": key}, timeout=60) as c:
        first = c.post("/memory/write", json={"content": "before the writers", "domain": "d0"})
        assert first.status_code == 200, first.text
    acknowledged: list[str] = [first.json()["atom_id"]]
    follower = Follower.of(tmp_path, servers[1].url, key)
    writers: list[subprocess.Popen[str]] = []
    walks: list[list[str]] = []
    failures: list[BaseException] = []
    writing = threading.Event()

    def walker(n: int) -> None:
        try:
            for _ in range(50):  # bounded: walks while the writers write, then one more
                walks.append(walk(servers[n % 2].url, key))
                if not writing.is_set():
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            failures.append(exc)

    state = StateDB(tmp_path / "state.db")
    consumer = RemoteBackend(servers[0].url, key)
    caught: list[str] = []
    try:
        follower.wait_for(lambda: follower.lines, "printed the first entry")
        assert follower.seen == acknowledged
        writers += start_writers(WRITER, servers, key, WRITERS, WRITES)
        writing.set()
        walkers = [threading.Thread(target=walker, args=(n,)) for n in range(2)]
        for thread in walkers:
            thread.start()
        for _ in range(3):  # catch-up passes while the writers write
            CatchUp(consumer, state, consumer="c", limit=7).run(lambda es: caught.extend(e.atom_id for e in es))
        for writer in writers:
            out, err = writer.communicate(timeout=300)
            assert writer.returncode == 0, err
            acknowledged += out.split()
        writing.clear()
        for thread in walkers:
            thread.join(timeout=300)
        assert not failures, failures
        CatchUp(consumer, state, consumer="c", limit=7).run(lambda es: caught.extend(e.atom_id for e in es))

        assert len(acknowledged) == len(set(acknowledged)) == WRITERS * WRITES + 1
        with psycopg.connect(url) as conn:
            stored = conn.execute("SELECT atom_id, content FROM atoms").fetchall()
        assert sorted(a for a, _ in stored) == sorted(acknowledged)  # every acknowledged write, once
        assert len({c for _, c in stored}) == len(stored)  # no content stored twice
        assert sorted(caught) == sorted(acknowledged)  # the consumer got each once
        for seen in walks:
            assert len(seen) == len(set(seen)) and set(seen) <= set(acknowledged)
        assert len(walks) >= 2
        assert sorted(walk(servers[0].url, key)) == sorted(acknowledged)  # a walk after the writes sees every entry
        follower.wait_printed(acknowledged, wait=30)  # the last writes
        assert sorted(follower.seen) == sorted(acknowledged)
        logs = "".join(line for server in servers for line in server.lines)
        assert not SERVER_ERROR.search(logs), SERVER_ERROR.findall(logs)[:5]
    finally:
        consumer.close()
        state.close()
        follower.stop()
        for writer in writers:
            if writer.poll() is None:
                writer.kill()


def test_a_request_time_limit_never_outlives_its_transaction(pg_databases: Any, pg_bouncer: Any) -> None:
    """The statement_timeout a request runs under is `SET LOCAL`, and no statement is prepared by default: every
    server connection pgbouncer holds for the database, each held at once by a client of its own, carries the
    server's default timeout and no prepared statement."""
    name = pg_databases.create()
    url = pg_bouncer.url(name)
    store = PgStore(url)
    try:
        with store.time_limit(1.5):
            store.write("team", WriteRequest(content="under a limit", domain="d"))
            for _ in range(8):  # past psycopg's threshold of 5, where it would prepare
                assert [e.content for e in store.recent("team", RecentQuery()).items] == ["under a limit"]
            with store.reading() as db:
                assert db.execute("SHOW statement_timeout").fetchone() == ("1500ms",)
        with psycopg.connect(pg_databases.cluster.admin_url(name), autocommit=True) as admin:
            held = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND usename = 'mnemo'", (name,)
            ).fetchone()[0]
        assert held >= 1
        others = [psycopg.connect(url, autocommit=True) for _ in range(held)]
        try:
            for other in others:  # each in a transaction: pgbouncer gives each its own server connection
                other.execute("BEGIN")
                assert other.execute("SHOW statement_timeout").fetchone() == ("0",)
                assert other.execute("SELECT count(*) FROM pg_prepared_statements").fetchone() == (0,)
        finally:
            for other in others:
                other.close()
    finally:
        store.close()
