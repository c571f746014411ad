"""The push follow is exact (issue 38): every acknowledged entry printed exactly once by every follower.

Real processes throughout: `mnemo serve` (SQLite, or two servers over one PostgreSQL database),
writer processes (over HTTP, and one writing the SQLite file itself), and `mnemo recent --follow
--format ndjson` followers. A server is killed with SIGKILL mid-stream and restarted on the same
port (held from start to end by a bound, never-listening socket); its followers resume from the
last position they received. Every wait is for a condition, bounded.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from mnemo_tui import timefmt
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.writes import WriteRequest
from tests.support.follow import Follower
from tests.support.reliability import kill9
from tests.support.serve import ServeProcess, start_serve

PER_WRITER = 40
BULK = 250  # written while the server is down: more than the 100 entries one event carries
SEED = 3
WAIT = 45.0  # seconds any one condition may take on a loaded machine

# A writer process. Over HTTP (`http URL KEY NAME COUNT`) each write carries an `external_ref`, so one
# whose answer was lost (the server killed) is asked again and answers the first atom, never a second;
# a refused connection (the server down) is asked again until the server is back (bounded). Or on the
# SQLite file itself (`file PATH PRINCIPAL NAME COUNT`): another process, woken by the change probe.
# Each acknowledged write prints `ack <atom_id>`; halfway, `half`, then waits for a line on stdin.
WRITER = r"""
import sys, time
mode, where, who, name, count = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
if mode == "http":
    import httpx
    client = httpx.Client(base_url=where, headers={"X-Api-Key": who}, timeout=30)
    def write(i):
        deadline = time.monotonic() + 90
        while True:
            try:
                r = client.post("/memory/write", json={"content": f"{name} {i}", "external_ref": f"{name}-{i}"})
                if r.status_code == 200:
                    return r.json()["atom_id"]
                if r.status_code not in (429, 503):
                    sys.exit(f"write refused: {r.status_code} {r.text}")
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                sys.exit("the server never came back")
            time.sleep(0.05)
else:
    from mnemo_tui.engine.sqlite.store import Store
    from mnemo_tui.values.writes import WriteRequest
    store = Store(where)
    def write(i):
        return store.write(who, WriteRequest(content=f"{name} {i}")).atom_id
for i in range(count):
    if i == count // 2:
        print("half", flush=True)
        sys.stdin.readline()
    print("ack", write(i), flush=True)
print("done", flush=True)
"""


@dataclass
class Writer:
    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    @classmethod
    def start(cls, *args: str) -> Writer:
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        writer = cls(proc)
        threading.Thread(target=writer._pump, daemon=True).start()
        return writer

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.changed:
                self.lines.append(line.strip())
                self.changed.notify_all()
        with self.changed:
            self.lines.append("<eof>")
            self.changed.notify_all()

    def wait_for(self, word: str) -> None:
        with self.changed:
            if not self.changed.wait_for(lambda: word in self.lines or "<eof>" in self.lines, WAIT):
                raise AssertionError(f"a writer never said {word!r}")
        if word not in self.lines:
            assert self.proc.stderr is not None
            raise AssertionError(f"a writer ended before {word!r}: {self.proc.stderr.read()}")

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def acked(self) -> list[str]:
        return [line.split()[1] for line in self.lines if line.startswith("ack ")]


def wait_until(follower: Follower, what: str, done: Callable[[list[str]], bool]) -> None:
    """Until `done(ids printed so far)`, at most WAIT; the follower must stay up meanwhile."""
    follower.wait_for(lambda: done(follower.seen), what, WAIT)


def half_way(writers: list[Writer], followers: list[Follower]) -> set[str]:
    """Until every writer wrote its first half and every follower printed all of it; then the writers go on.
    The ids of the first half."""
    for writer in writers:
        writer.wait_for("half")
    first_half = {a for w in writers for a in w.acked()}
    for follower in followers:
        wait_until(follower, "printed the first half", lambda ids: first_half <= set(ids))
    for writer in writers:
        writer.go()
    return first_half


def stop_all(followers: list[Follower], writers: list[Writer], servers: list[ServeProcess]) -> None:
    """Stop what still runs of a test's processes: the followers as ^C does, the writers with SIGKILL, the servers."""
    for follower in followers:
        follower.stop()
    for writer in writers:
        if writer.proc.poll() is None:
            kill9(writer.proc)
    for server in servers:
        if server.proc.poll() is None:
            server.stop()


@contextlib.contextmanager
def held_port() -> Iterator[int]:
    """A port held from start to end by a bound socket that never listens: a client is refused while no
    server runs, no other process is given the port in between, and each server binds it beside it."""
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    held.bind(("127.0.0.1", 0))
    with held:
        yield held.getsockname()[1]


def exactly_once(followers: list[Follower], acked: set[str], everything: Callable[[], set[str]]) -> None:
    """Each follower prints every entry of the store once: all acknowledged ones, none twice, none invented."""
    for follower in followers:
        wait_until(follower, "printed every acknowledged entry", lambda ids: acked <= set(ids))
        stored = everything()
        wait_until(follower, "printed every stored entry", lambda ids, stored=stored: stored <= set(ids))
        ids = follower.seen
        assert len(ids) == len(set(ids)), f"printed twice: {sorted(i for i in set(ids) if ids.count(i) > 1)}"
        assert set(ids) == stored
        assert follower.proc.poll() is None, follower.stderr


def wait_follow_logged(server: ServeProcess, count: int) -> None:
    """Until the server's access log shows `count` follow requests (a stream is logged when it ends)."""
    pause = threading.Event()
    for _ in range(int(WAIT / 0.05)):
        if sum('"POST /api/v1/memory/follow"' in line for line in server.lines) >= count:
            return
        pause.wait(0.05)
    raise AssertionError("no follow request logged: " + "".join(server.lines)[-3000:])


# -- SQLite --------------------------------------------------------------------------------


def _sqlite_ids(path: Path) -> set[str]:
    db = sqlite3.connect(path)
    try:
        return {r[0] for r in db.execute("SELECT atom_id FROM atoms")}
    finally:
        db.close()


def _sqlite_follow(tmp_path: Path, kill: bool) -> None:
    path = tmp_path / "served.db"
    store = Store(path)
    key = store.create_key("alice")[1]
    since = timefmt.to_iso(timefmt.now_us() - 60_000_000)
    for i in range(SEED):
        store.write("alice", WriteRequest(content=f"seed {i}"))
    store.close()
    writers: list[Writer] = []
    followers: list[Follower] = []
    with held_port() as port:
        server = start_serve(tmp_path / "server", port=port, store=path)
        try:
            followers = [
                Follower.of(tmp_path / "f1", server.url, key),
                Follower.of(tmp_path / "f2", server.url, key, "--since", since),
            ]
            for follower in followers:  # the seed printed: each is following from here
                wait_until(follower, "printed the seed", lambda ids: len(ids) >= SEED)
            writers = [
                Writer.start("http", server.url, key, "w1", str(PER_WRITER)),
                Writer.start("http", server.url, key, "w2", str(PER_WRITER)),
                Writer.start("file", str(path), "alice", "w3", str(PER_WRITER)),
            ]
            first_half = half_way(writers, followers)
            if kill:
                # Mid-stream: once the second half flows, the server dies with SIGKILL and comes back.
                wait_until(followers[0], "printed a later entry", lambda ids: len(ids) > SEED + len(first_half))
                kill9(server.proc)
                # While no server runs, more than a chunk (100) lands: the resume sends it in several events.
                down = Store(path)
                bulk = {down.write("alice", WriteRequest(content=f"while down {i}")).atom_id for i in range(BULK)}
                down.close()
                server = start_serve(tmp_path / "server", port=port, store=path)
            for writer in writers:
                writer.wait_for("done")
            acked = {a for w in writers for a in w.acked()}
            assert len(acked) == 3 * PER_WRITER
            if kill:
                acked |= bulk
            exactly_once(followers, acked, lambda: _sqlite_ids(path))
            assert _sqlite_ids(path) == acked | set(followers[0].seen[:SEED])
            for follower in followers:  # both read the stream (after a kill: came back by it), not by polling
                follower.stop()
            wait_follow_logged(server, len(followers))
        finally:
            stop_all(followers, writers, [server])


def test_sqlite_writers_in_three_processes_every_acknowledged_entry_printed_once_by_each_follower(
    tmp_path: Path,
) -> None:
    _sqlite_follow(tmp_path, kill=False)


def test_sqlite_server_killed_mid_stream_and_restarted_on_its_port_the_followers_resume_exactly(
    tmp_path: Path,
) -> None:
    _sqlite_follow(tmp_path, kill=True)


# -- PostgreSQL: two servers on one database -------------------------------------------------


def _pg_ids(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute("SELECT atom_id FROM atoms")}


def _pg_seeded(pg_databases: Any, principal: str, seeds: int) -> tuple[str, str]:
    """A fresh database with an API key of `principal` and `seeds` entries of theirs: its URL and the key."""
    from mnemo_tui.engine.postgres.store import PgStore

    url = pg_databases.cluster.url(pg_databases.create())
    admin = PgStore(url)
    try:
        key = admin.create_key(principal)[1]
        for i in range(seeds):
            admin.write(principal, WriteRequest(content=f"seed {i}"))
    finally:
        admin.close()
    return url, key


@pytest.mark.slow
def test_postgres_writers_on_one_server_a_follower_on_the_other_both_killed_and_restarted_exactly_once(
    pg_databases: Any, tmp_path: Path
) -> None:
    from mnemo_tui.engine.postgres.store import PgStore

    url, key = _pg_seeded(pg_databases, "team", SEED)
    # Sessions of their own (no pooler in between), so the servers LISTEN as well as poll slowly.
    args = ("--database", url, "--database-pooler", "none", "--workers", "4")
    writers: list[Writer] = []
    followers: list[Follower] = []
    servers: list[ServeProcess] = []
    with held_port() as port, held_port() as port_a:
        try:
            a = start_serve(tmp_path / "a", *args, port=port_a)
            servers.append(a)
            b = start_serve(tmp_path / "b", *args, port=port)
            servers.append(b)
            followers = [
                Follower.of(tmp_path / "fb", b.url, key),
                Follower.of(tmp_path / "fa", a.url, key),
            ]
            for follower in followers:
                wait_until(follower, "printed the seed", lambda ids: len(ids) >= SEED)
            writers = [Writer.start("http", a.url, key, f"w{i}", str(PER_WRITER)) for i in range(2)]
            first_half = half_way(writers, followers)
            # Server A, the writers', dies with SIGKILL as they go on: a write it committed may never have
            # been answered (asked again: its `external_ref` answers the same atom) nor notified (B's slow
            # poll or A's next NOTIFY finds it). A comes back on its port; its writers and follower with it.
            kill9(a.proc)
            a = start_serve(tmp_path / "a", *args, port=port_a)
            servers.append(a)
            # Server B dies with SIGKILL mid-stream; its follower resumes on B restarted on the same port.
            wait_until(followers[0], "printed a later entry", lambda ids: len(ids) > SEED + len(first_half))
            kill9(b.proc)
            down = PgStore(url)  # more than a chunk lands while B is down
            bulk = {down.write("team", WriteRequest(content=f"while down {i}")).atom_id for i in range(BULK)}
            down.close()
            b = start_serve(tmp_path / "b", *args, port=port)
            servers.append(b)
            for writer in writers:
                writer.wait_for("done")
            acked = {x for w in writers for x in w.acked()}
            assert len(acked) == 2 * PER_WRITER
            acked |= bulk
            exactly_once(followers, acked, lambda: _pg_ids(url))
            for follower in followers:
                follower.stop()
            wait_follow_logged(b, 1)
            wait_follow_logged(a, 1)
        finally:
            stop_all(followers, writers, servers)


# `mnemo serve` whose slow poll of the change token runs once an hour: within this test only a NOTIFY
# from another server (or its own LISTEN starting) can wake its followers.
NOTIFY_ONLY = r"""
import sys
from mnemo_tui.server import wake
wake.PG_POLL_SECONDS = 3600.0
from mnemo_tui.cli import run
sys.argv = ["mnemo", *sys.argv[1:]]
run()
"""


@pytest.mark.slow
def test_postgres_a_write_on_one_server_is_pushed_to_a_follower_of_the_other_by_notify(
    pg_databases: Any, tmp_path: Path
) -> None:
    """No time measured: server B's slow poll is an hour, so what reaches its follower came by NOTIFY.

    Three writes on A, each awaited on B's follower before the next: B's first probe of the token (as a
    follower joins) and its wake-up once LISTEN runs can each deliver one at most, so the third at least
    came by a notification of A."""
    url, key = _pg_seeded(pg_databases, "team", 1)
    args = ("--database", url, "--database-pooler", "none", "--workers", "2")
    servers: list[ServeProcess] = []
    follower: Follower | None = None
    try:
        servers.append(start_serve(tmp_path / "a", *args))
        servers.append(start_serve(tmp_path / "b", *args, program=(sys.executable, "-c", NOTIFY_ONLY)))
        a, b = servers
        follower = Follower.of(tmp_path / "fb", b.url, key)
        wait_until(follower, "printed the seed", lambda ids: len(ids) == 1)
        for i in range(3):
            answer = httpx.post(a.url + "/memory/write", json={"content": f"on A {i}"}, headers={"X-Api-Key": key})
            assert answer.status_code == 200, answer.text
            written = answer.json()["atom_id"]
            wait_until(follower, f"printed write {i} of server A", lambda ids, written=written: written in ids)
        ids = follower.seen
        assert len(ids) == len(set(ids)) == 4
    finally:
        if follower is not None:
            follower.stop()
        for server in servers:
            if server.proc.poll() is None:
                server.stop()


# -- a stream cut after any event resumes exactly (the wire itself, no client in between) -------------


def _events(url: str, key: str, last_id: str | None, final: int, stop_after: int | None = None) -> list[Any]:
    """The follow's events (name, id, atom ids) after `last_id`, read until the one whose id is `final`
    (or `stop_after` of them); the connection is then closed, as a cut."""
    headers = {"X-Api-Key": key, "Accept": "text/event-stream"}
    if last_id is not None:
        headers["Last-Event-ID"] = last_id
    got: list[Any] = []
    name, ident, data = None, None, ""
    with httpx.stream("POST", url + "/memory/follow", json={}, headers=headers, timeout=WAIT) as answer:
        assert answer.status_code == 200, answer.read()
        for line in answer.iter_lines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("id:"):
                ident = line[3:].strip()
            elif line.startswith("data:"):
                data += line[5:].strip()
            elif line == "" and name is not None:
                body = json.loads(data)
                ids = [i["atom_id"] for i in body.get("items", body.get("removed", []))]
                got.append((name, ident, ids))
                if name == "error" or ident == str(final) or (stop_after is not None and len(got) == stop_after):
                    break
                name, ident, data = None, None, ""
    return got


_OWN_CLOCK = "SELECT last_created_at FROM buckets WHERE kind = 'own' AND owner = 'alice'"


def _cut_anywhere(url: str, key: str, store: Any, final: Callable[[], int]) -> None:
    """Cut after event k of a window of 330 writes and 9 deletes (several `entries` events of at most
    100, removals between them), resumed from that event's id: the events received before the cut and
    after the resume carry the uncut stream's entries and removals, each once (an event's entries come
    newest first, so where its chunks are cut may differ: the order is not compared, the removals' is)."""
    start = _events(url, key, None, 0, stop_after=1)
    assert start[0][0] == "entries" and start[0][1] is not None
    position = start[0][1]
    written: list[str] = []
    deleted: list[str] = []
    for batch in range(3):  # a delete at the end of each batch: removals between entries events
        written += [store.write("alice", WriteRequest(content=f"b{batch} {i}")).atom_id for i in range(110)]
        for doomed in (written[-60], written[-50], written[5 + batch]):
            answer = httpx.delete(f"{url}/memory/atoms/{doomed}", headers={"X-Api-Key": key})
            assert answer.status_code == 200 and answer.json()["deleted"] == 1, answer.text
            deleted.append(doomed)
    last = final()
    whole = _events(url, key, position, last)
    assert [e[0] for e in whole].count("removed") == 3 and max(len(e[2]) for e in whole) == 100
    flat = [(name, i) for name, _, ids in whole for i in ids]
    # An entry deleted before it was read comes as its removal alone.
    assert sorted(i for name, i in flat if name == "entries") == sorted(set(written) - set(deleted))
    assert [i for name, i in flat if name == "removed"] == deleted  # oldest first
    for cut in range(1, len(whole)):
        before = _events(url, key, position, last, stop_after=cut)
        after = _events(url, key, before[-1][1], last)
        again = [(name, i) for name, _, ids in before + after for i in ids]
        assert len(again) == len(set(again)), f"cut after event {cut} of {len(whole)}: sent twice"
        assert set(again) == set(flat), f"cut after event {cut} of {len(whole)}: skipped"
        assert [x for x in again if x[0] == "removed"] == [x for x in flat if x[0] == "removed"]


def test_sqlite_a_stream_cut_after_any_event_of_a_chunked_window_resumes_with_nothing_skipped_or_sent_twice(
    tmp_path: Path,
) -> None:
    path = tmp_path / "served.db"
    store = Store(path)
    key = store.create_key("alice")[1]
    store.write("alice", WriteRequest(content="seed"))
    server = start_serve(tmp_path / "server", store=path)

    def final() -> int:
        with contextlib.closing(sqlite3.connect(path)) as db:
            return int(db.execute(_OWN_CLOCK).fetchone()[0])

    try:
        _cut_anywhere(server.url, key, store, final)
    finally:
        store.close()
        server.stop()


@pytest.mark.slow
def test_postgres_a_stream_cut_after_any_event_of_a_chunked_window_resumes_with_nothing_skipped_or_sent_twice(
    pg_databases: Any, tmp_path: Path
) -> None:
    from mnemo_tui.engine.postgres.store import PgStore

    url, key = _pg_seeded(pg_databases, "alice", 1)
    store = PgStore(url)
    server = start_serve(tmp_path / "server", "--database", url, "--workers", "2")

    def final() -> int:
        with psycopg.connect(url) as conn:
            row = conn.execute(_OWN_CLOCK).fetchone()
            assert row is not None
            return int(row[0])

    try:
        _cut_anywhere(server.url, key, store, final)
    finally:
        store.close()
        server.stop()
