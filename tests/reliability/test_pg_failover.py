"""A primary that fails (issue 41): a primary and a synchronous standby, two `mnemo serve` over a multi-host URL
(`target_session_attrs=read-write`), writers and a walk in progress; the primary stopped hard (`-m immediate`), the
standby promoted. No acknowledged write is lost, the walk finishes with its cursor, nothing is repeated or stored
twice; a write whose fate is unknown is reported by its client, never retried blindly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.engine.postgres.store import PgStore
from mnemo_tui.errors import FateUnknown, MnemoError
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support import pg
from tests.support.serve import ServeProcess, start_serve

pytestmark = pytest.mark.slow

WRITERS = 2
BEFORE = 30  # entries written before anything starts: the walk's ground
AFTER = 10  # acknowledged writes each writer makes after the promotion before it stops


class Counted:
    """A client's sleeps between retries, counted (its `sleep`)."""

    def __init__(self) -> None:
        self.retries = 0

    def __call__(self, seconds: float) -> None:
        self.retries += 1
        time.sleep(seconds)


@pytest.fixture
def pair() -> Iterator[tuple[pg.Cluster, pg.Cluster, str]]:
    if pg.binaries() is None:
        pytest.skip(pg.NO_POSTGRES)  # a failure under CI=true, as every skip
    primary = pg.start_cluster(options="-c fsync=off -c full_page_writes=off")  # commits wait for the standby
    standby: pg.Cluster | None = None
    try:
        with psycopg.connect(primary.admin_url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE team TEMPLATE mnemo_template OWNER {pg.USER}")
        standby = pg.start_standby(primary)
        url = (
            f"postgresql://{pg.USER}:{pg.PASSWORD}@127.0.0.1:{primary.port},127.0.0.1:{standby.port}"
            "/team?target_session_attrs=read-write&connect_timeout=2"
        )
        yield primary, standby, url
    finally:
        for cluster in (standby, primary):
            if cluster is not None:
                pg.stop_cluster(cluster)


def test_a_failover_loses_no_acknowledged_write_and_walks_finish(
    pair: tuple[pg.Cluster, pg.Cluster, str], tmp_path: Path
) -> None:
    primary, standby, url = pair
    admin = PgStore(url)
    key = admin.create_key("team")[1]
    ground = [admin.write("team", WriteRequest(content=f"before {i}", domain="d")).atom_id for i in range(BEFORE)]
    admin.close()
    servers: list[ServeProcess] = []
    for i in range(2):
        home = tmp_path / f"server{i}"
        home.mkdir()
        servers.append(start_serve(home, "--database", url, "--workers", "2"))
    sleeps = [Counted() for _ in range(WRITERS + 1)]
    acked: list[tuple[float, str, str]] = []  # (when, atom_id, content)
    unknown: list[str] = []
    refused: list[tuple[str, str]] = []
    promoted = threading.Event()
    after = [0] * WRITERS
    lock = threading.Lock()

    def writer(n: int) -> None:
        client = RemoteBackend(servers[n % 2].url, key, sleep=sleeps[n])
        try:
            for i in range(10_000):  # bounded; stops AFTER acknowledged writes past the promotion
                content = f"w{n} {i}"
                try:
                    atom = client.write(WriteRequest(content=content, domain="d")).atom_id
                except FateUnknown:
                    unknown.append(content)  # reported, never sent again
                    continue
                except MnemoError as exc:
                    refused.append((content, exc.message))
                    continue
                with lock:
                    acked.append((time.monotonic(), atom, content))
                    if promoted.is_set():
                        after[n] += 1
                if after[n] >= AFTER:
                    return
        finally:
            client.close()

    walker = RemoteBackend(servers[1].url, key, sleep=sleeps[-1])
    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    try:
        page = walker.recent(RecentQuery(limit=5))  # a walk in progress, over the ground and the first writes
        walked = [e.atom_id for e in page.items]
        for thread in threads:
            thread.start()
        for _ in range(600):  # bounded: the writers are writing
            if len(acked) >= 2 * WRITERS:
                break
            time.sleep(0.05)
        page = walker.recent(RecentQuery(limit=5, cursor=page.next_cursor))
        walked += [e.atom_id for e in page.items]
        stopped_at = time.monotonic()
        primary.stop("immediate")  # hard: no shutdown checkpoint, connections cut
        standby._run("pg_ctl", "-D", str(standby.data), "-w", "-t", "60", "promote")
        promoted.set()
        promoted_at = time.monotonic()
        cursor = page.next_cursor
        for _ in range(100):  # bounded: the walk continues with its cursor on the new primary
            if cursor is None:
                break
            page = walker.recent(RecentQuery(limit=5, cursor=cursor))
            walked += [e.atom_id for e in page.items]
            cursor = page.next_cursor
        for thread in threads:
            thread.join(timeout=300)
        assert cursor is None and not any(t.is_alive() for t in threads)
    finally:
        walker.close()
        for server in servers:
            if server.proc.poll() is None:
                server.stop()

    with psycopg.connect(url) as conn:
        stored = conn.execute("SELECT atom_id, content FROM atoms").fetchall()
    ids = {a for a, _ in stored}
    contents = [c for _, c in stored]
    assert {a for _, a, _ in acked} <= ids  # 0 acknowledged writes lost
    assert len(contents) == len(set(contents))  # no content stored twice
    assert set(contents) <= {f"before {i}" for i in range(BEFORE)} | {c for *_, c in acked} | set(unknown) | {
        c for c, _ in refused
    }
    assert not {c for c, _ in refused} & set(contents), refused  # a refused write (not processed) is not stored
    assert walked == list(reversed(ground))  # the walk begun before the writes: every entry once, in order
    # The failover's window: the longest wait between two acknowledgements, from the last before the stop to the
    # first after the promotion.
    times = sorted(t for t, *_ in acked)
    first = max(i for i, t in enumerate(times) if t <= stopped_at)
    last = min(i for i, t in enumerate(times) if t > promoted_at)
    window = max(b - a for a, b in zip(times[first:last], times[first + 1 : last + 1], strict=True))
    report = (
        f"failover: window without acknowledged writes {window:.2f} s (promote took {promoted_at - stopped_at:.2f} s); "
        f"client retries {sum(s.retries for s in sleeps)} (writers {[s.retries for s in sleeps[:-1]]}, "
        f"walker {sleeps[-1].retries}); acknowledged {len(acked)}, fate unknown {len(unknown)} "
        f"({len(set(unknown) & set(contents))} of them stored), refused {len(refused)}"
    )
    print(report)  # the figures docs/server.md quotes (pytest -s shows them)
