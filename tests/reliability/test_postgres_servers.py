"""Several `mnemo serve` processes over one PostgreSQL database: concurrent writers on every server, consumers whose
every page goes to the next server, a server killed with SIGKILL mid-walk, a writer killed inside its transaction,
and the database restarted mid-walk. Every loop is bounded; every server binds 127.0.0.1."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from mnemo_tui.backends.delegate import DelegatingBackend
from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.catchup.catchup import CatchUp
from mnemo_tui.engine.postgres.store import PgStore
from mnemo_tui.errors import Unavailable
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.values.model import Entry, Page, RecentQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support import pg
from tests.support.serve import ServeProcess, servers_over_database, start_writers

pytestmark = pytest.mark.slow

WRITERS = 4
WRITES = 40  # per writer
PASSES = 4  # per consumer while the writers write

# A writer process: WRITES entries of the shared principal's own store (one bucket), each on its server.
WRITER = """
import sys, httpx
url, key, name, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with httpx.Client(base_url=url, headers={"X-Api-Key": key}, timeout=60) as c:
    for i in range(count):
        for attempt in range(20):
            r = c.post("/memory/write", json={"content": f"{name} {i}", "domain": f"d{i % 3}"})
            if r.status_code != 503:
                break
        assert r.status_code == 200, r.text
print("done", flush=True)
"""


class RoundRobin(DelegatingBackend):
    """A load balancer in a test: every page goes to the next server; a server that does not answer is skipped."""

    def __init__(self, backends: list[RemoteBackend]) -> None:
        super().__init__(backends[0])
        self.identity = "the team's service"  # one service behind many servers: one watermark
        self.backends = backends
        self.turn = itertools.count()
        self.dead: set[int] = set()

    def recent(self, query: RecentQuery) -> Page:
        for _ in range(len(self.backends)):
            i = next(self.turn) % len(self.backends)
            if i in self.dead:
                continue
            try:
                return self.backends[i].recent(query)
            except Unavailable:
                self.dead.add(i)
        raise Unavailable("no server answered")

    def snapshot_wire(self, query: RecentQuery) -> None:
        return None  # page by page, so the pages spread over the servers


@pytest.fixture
def three_servers(pg_databases: Any, tmp_path: Path) -> Iterator[tuple[str, str, list[ServeProcess]]]:
    url = pg_databases.cluster.url(pg_databases.create())
    with servers_over_database(url, tmp_path, 3) as (key, servers):
        yield url, key, servers


def _all_ids(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute("SELECT atom_id FROM atoms")}


def test_writers_on_three_servers_and_round_robin_consumers_lose_and_repeat_nothing(
    three_servers: tuple[str, str, list[ServeProcess]], tmp_path: Path
) -> None:
    url, key, servers = three_servers
    writers = start_writers(WRITER, servers, key, WRITERS, WRITES)
    backends = [RemoteBackend(s.url, key) for s in servers]
    state = StateDB(tmp_path / "state.db")
    got: dict[str, list[str]] = {"c1": [], "c2": []}
    try:
        consumers = {name: RoundRobin(backends) for name in got}

        def run_pass(name: str) -> None:
            CatchUp(consumers[name], state, consumer=name, limit=7).run(
                lambda es: got[name].extend(e.atom_id for e in es)
            )

        for _ in range(PASSES):
            for name in got:
                run_pass(name)
        for writer in writers:
            out, err = writer.communicate(timeout=300)
            assert writer.returncode == 0 and "done" in out, err
        for name in got:
            run_pass(name)
        everything = _all_ids(url)
        assert len(everything) == WRITERS * WRITES
        for name, ids in got.items():
            assert len(ids) == len(set(ids)), f"{name} received an entry twice"
            assert set(ids) == everything, f"{name} missed {len(everything - set(ids))} entries"

        # created_at strictly increasing in commit (= seq) order within the bucket, across the servers.
        with psycopg.connect(url) as conn:
            times = [r[0] for r in conn.execute("SELECT created_at FROM atoms ORDER BY seq")]
        assert all(a < b for a, b in itertools.pairwise(times))

        # SIGKILL of one server mid-walk: the walk finishes on the others, nothing lost or repeated.
        more = RemoteBackend(servers[1].url, key)
        for i in range(30):
            more.write(WriteRequest(content=f"late {i}", domain="late"))
        more.close()
        before = len(got["c1"])
        pages = [0]

        def emit(entries: list[Entry]) -> None:
            got["c1"].extend(e.atom_id for e in entries)
            pages[0] += 1
            if pages[0] == 1:
                servers[0].proc.send_signal(signal.SIGKILL)
                servers[0].proc.wait(timeout=20)

        CatchUp(consumers["c1"], state, consumer="c1", limit=3).run(emit)
        assert pages[0] >= 3 and 0 in consumers["c1"].dead
        late = got["c1"][before:]
        assert len(late) == len(set(late)) == 30 and set(got["c1"]) == _all_ids(url)
    finally:
        state.close()
        for backend in backends:
            backend.close()
        for writer in writers:
            if writer.poll() is None:
                writer.kill()


# A writer stopped inside the engine's insert transaction, rows written and the bucket locked, never committed.
STOPPED_WRITER = """
import sys, time
from mnemo_tui.engine.postgres.store import PgStore
from mnemo_tui.values.writes import WriteRequest

class Stopped(PgStore):
    def index_since(self, db, mark):
        print("inside", flush=True)
        time.sleep(120)

Stopped(sys.argv[1]).write("team", WriteRequest(content="never committed", domain="d"))
"""


def test_a_writer_killed_inside_its_transaction_leaves_no_trace(pg_databases: Any) -> None:
    url = pg_databases.cluster.url(pg_databases.create())
    store = PgStore(url)
    try:
        store.write("team", WriteRequest(content="committed", domain="d"))
        proc = subprocess.Popen([sys.executable, "-c", STOPPED_WRITER, url], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "inside"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=20)
        # Its bucket lock went with its connection: the next write of the bucket commits (bounded wait).
        with store.time_limit(30):
            after = store.write("team", WriteRequest(content="after", domain="d"))
        items = store.recent("team", RecentQuery(limit=10)).items
        assert items[0].atom_id == after.atom_id and len(items) == 2
        assert "never committed" not in "".join(e.wire for e in items)
        with store.reading() as db:
            assert db.execute("SELECT count(*) FROM atoms WHERE content = 'never committed'").fetchone() == (0,)
    finally:
        store.close()


def test_a_database_restart_mid_walk_is_a_retryable_error_then_the_walk_finishes(pg_databases: Any) -> None:
    from tests.support.targets import Target
    from tests.support.wire import served_store

    cluster: pg.Cluster = pg_databases.cluster
    target = Target("postgres", cluster.url(pg_databases.create()))
    admin = target.open()
    key = admin.create_key("team")[1]
    for i in range(20):
        admin.write("team", WriteRequest(content=f"entry {i}", domain="d"))
    admin.close()
    with served_store(target) as server:
        backend = RemoteBackend(server.url, key)
        try:
            first = backend.recent(RecentQuery(limit=5))
            cluster.stop("fast")
            try:
                answer = httpx.post(
                    server.url + "/memory/recent",
                    json={"limit": 5, "cursor": first.next_cursor},
                    headers={"X-Api-Key": key},
                    timeout=60,
                )
                assert answer.status_code == 503, answer.text
                assert answer.json()["code"] in ("SERVICE_UNAVAILABLE", "UNAVAILABLE"), answer.text
            finally:
                cluster.start()
            seen = [e.atom_id for e in first.items]
            cursor = first.next_cursor
            for _ in range(20):  # bounded: 15 entries left, 5 a page
                if cursor is None:
                    break
                page = backend.recent(RecentQuery(limit=5, cursor=cursor))  # the client retries a 503 itself
                seen += [e.atom_id for e in page.items]
                cursor = page.next_cursor
            assert cursor is None and len(seen) == len(set(seen)) == 20
        finally:
            backend.close()
