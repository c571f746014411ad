"""The streamed walk (docs/server.md, "The streamed walk"): over a real `mnemo serve`, `recent --all`, `catchup` and `verify` read
one NDJSON answer each; a plain-JSON endpoint is walked page by page; a stream cut by a killed server resumes
from its last cursor; a streamed catch-up beside concurrent writers misses and repeats nothing."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui import timefmt
from mnemo_tui.backends import remote_http
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.catchup.walk import Walk, stream_wire
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.errors import BrokenFeed, Unavailable
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.cli import MNEMO, CliResult, on_terminal, terminal_env
from tests.support.reliability import Passes
from tests.support.serve import ServeProcess, start_serve
from tests.support.targets import Target
from tests.support.wire import LateClock, read_body, serving

RECENT = '"POST /api/v1/memory/recent"'


def seeded(engine: Any, n: int, pad: int = 0) -> tuple[str, list[str]]:
    """`n` entries of alice (a key made for her) and the embedded walk of them: their wire lines, newest first."""
    key = engine.create_key("alice")[1]
    base = timefmt.now_us() - 3_600_000_000
    filler = "x" * pad  # one long word: the full-text index stays small
    rows = [("alice", WriteRequest(content=f"entry {i} {filler}", domain="notes"), base + i) for i in range(n)]
    engine.bulk_insert(rows)
    walk = stream_wire(LocalBackend(engine, "alice"), RecentQuery())
    return key, [line for chunk in walk for line in chunk]


def recent_requests(log: str) -> int:
    return sum(1 for line in log.splitlines() if RECENT in line)


def test_recent_all_catchup_and_verify_over_mnemo_serve_each_read_one_stream(
    isolated_home: Path, cli: Callable[..., CliResult]
) -> None:
    store = Store(isolated_home / "store.db")
    key, embedded = seeded(store, 2345)  # three lines of the stream: 1,000, 1,000 and 345 entries
    store.close()
    served = start_serve(isolated_home)
    try:
        env = {"MNEMO_ENDPOINT": served.url, "MNEMO_API_KEY": key}
        walked = cli("recent", "--all", "--format", "ndjson", env=env)
        assert walked.code == 0, walked.stderr
        assert walked.stdout.splitlines() == embedded  # each entry once, in order, byte for byte
        caught = cli("catchup", "--format", "json", env=env)
        assert caught.code == 0, caught.stderr
        ids = [json.loads(line)["atom_id"] for line in embedded]
        assert [item["atom_id"] for item in json.loads(caught.stdout)["items"]] == ids
        verified = cli("verify", "--expect", "-", input="\n".join(ids), env=env)
        assert verified.code == 0, verified.stdout + verified.stderr
    finally:
        _code, log = served.stop()
    assert recent_requests(log) == 3  # one request a walk: the stream, not 24 pages


class Counted(LateClock):
    """The plain-JSON endpoint (one page an answer, whatever is asked for), counting its feed requests."""

    def __init__(self) -> None:
        super().__init__()
        self.accepts: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/memory/recent"):
            self.accepts.append(dict(scope["headers"]).get(b"accept", b"").decode())
        await super().__call__(scope, receive, send)


def test_an_endpoint_that_answers_plain_json_is_walked_page_by_page(cli: Callable[..., CliResult]) -> None:
    clock = Counted()
    base = timefmt.now_us() - 60_000_000
    ids = [f"{n:08d}-0000-4000-8000-000000000000" for n in range(250)]
    for n, atom in enumerate(ids):
        clock.add(base + n, atom)
    with serving(clock) as server:
        env = {"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": "mk_live_" + "1" * 32}
        result = cli("recent", "--all", "--format", "ndjson", env=env)
    assert result.code == 0, result.stderr
    assert [json.loads(line)["atom_id"] for line in result.stdout.splitlines()] == ids[::-1]
    assert len(clock.accepts) == 3  # pages of 100, 100 and 50
    assert "application/x-ndjson" in clock.accepts[0]  # it asked for the stream, and took the page it got


def _held_port() -> socket.socket:
    # Bound, never listening: a client is refused while no server runs, and no other process takes the port
    # between the two servers, which each bind it beside (SO_REUSEADDR) as in test_remote_faults.py.
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    held.bind(("127.0.0.1", 0))
    return held


def test_a_server_killed_mid_stream_is_asked_again_from_the_last_cursor(isolated_home: Path) -> None:
    store = Store(isolated_home / "store.db")
    # ~60 MB: more than the socket buffers (up to 32 + 4 MB here) and the server's line in hand can hold
    # while the client does not read, so the first server is still in the middle of its stream when killed.
    key, embedded = seeded(store, 12_000, pad=5_000)
    store.close()
    held = _held_port()
    port = held.getsockname()[1]
    with held:
        first = start_serve(isolated_home, "--port", str(port))
        env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
        env.update(MNEMO_HOME=str(isolated_home), MNEMO_ENDPOINT=first.url, MNEMO_API_KEY=key)
        errors = (isolated_home / "client.err").open("wb")
        client = subprocess.Popen(
            [MNEMO, "recent", "--all", "--format", "ndjson"], stdout=subprocess.PIPE, stderr=errors, env=env
        )
        second: ServeProcess | None = None
        try:
            assert client.stdout is not None
            # The first lines came; the client now blocks on its full stdout pipe, in the middle of the stream.
            head = [client.stdout.readline() for _ in range(10)]
            first.proc.send_signal(signal.SIGKILL)
            first.proc.wait(timeout=30)
            second = start_serve(isolated_home, "--port", str(port))
            assert second.url == first.url
            rest = client.stdout.read()  # through the same buffered reader as the first lines
            client.wait(timeout=300)
        finally:
            if client.poll() is None:
                client.kill()
            errors.close()
            log = second.stop()[1] if second is not None else ""
    assert client.returncode == 0, (isolated_home / "client.err").read_text()
    lines = [line.rstrip(b"\n").decode() for line in head] + rest.decode().splitlines()
    assert lines == embedded  # every entry exactly once, in order
    assert recent_requests(log) == 1  # the second server was asked once: the walk resumed, it did not start over


# Run after the opening `Passes.start` gives it (the target opened as `engine`, `wait_for_a_pass`).
_WRITER = """
name, count = sys.argv[4], int(sys.argv[5])
seen = passes_now()
for i in range(count):
    print(engine.write("alice", WriteRequest(content=f"{name} {i}", domain="notes")).atom_id, flush=True)
    if i % 25 == 24:  # wait for the consumer's next pass, so writes and passes interleave
        wait_for_a_pass(seen)
        seen = passes_now()
engine.close()
"""


def test_a_streamed_catchup_beside_writers_delivers_every_entry_exactly_once(
    target: Target, isolated_home: Path, cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    if target.engine == "sqlite":
        target = Target("sqlite", isolated_home / "store.db")  # where `mnemo serve` finds its store
    engine = target.open()
    try:
        key, before = seeded(engine, 2500)  # the first pass is a stream of three lines
    finally:
        engine.close()
    where = ("--database", str(target.location)) if target.engine == "postgres" else ()
    served = start_serve(isolated_home, *where, "--workers", "4")
    passes = Passes(tmp_path / "passes")
    writers = [passes.start(_WRITER, target, f"w{n}", "100") for n in range(2)]
    delivered: list[str] = []
    env = {"MNEMO_ENDPOINT": served.url, "MNEMO_API_KEY": key}

    def one_pass() -> None:
        result = cli("catchup", "--format", "ndjson", env=env)
        assert result.code == 0, result.stderr
        delivered.extend(json.loads(line)["atom_id"] for line in result.stdout.splitlines())

    try:
        count = passes.run(one_pass, writers, most=200)  # the last pass after the last write: nothing may be left
        outputs = [w.communicate(timeout=60) for w in writers]
    finally:
        for w in writers:
            if w.poll() is None:
                w.kill()
        _code, log = served.stop()
    for w, (_out, err) in zip(writers, outputs, strict=True):
        assert w.returncode == 0, err
    written = [i for out, _ in outputs for i in out.split()]
    assert count > 1 and len(written) == 200
    assert len(delivered) == len(set(delivered)), "an entry was delivered twice"
    assert set(delivered) == set(written) | {json.loads(line)["atom_id"] for line in before}
    assert recent_requests(log) == count + 1  # one streamed request a pass


class Cut(LateClock):
    """An endpoint with the stream: pages of 100 a line; its first stream ends after `lines` lines without
    the last one (a connection cut between lines), or sends a line of `huge` bytes first."""

    def __init__(self, lines: int = 1, huge: int = 0, always: bool = False) -> None:
        super().__init__()
        self.lines, self.huge, self.always = lines, huge, always  # `always`: every stream is cut so
        self.cursors: list[str | None] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        body = json.loads(await read_body(receive))
        self.cursors.append(body.get("cursor"))
        rows = sorted(self.entries, reverse=True)
        start = int(body["cursor"][1:]) if body.get("cursor") else 0
        head = [(b"content-type", b"application/x-ndjson")]
        await send({"type": "http.response.start", "status": 200, "headers": head})
        if self.huge:
            await send({"type": "http.response.body", "body": b"x" * self.huge + b"\n", "more_body": True})
        sent = 0
        while start < len(rows) and ((len(self.cursors) > 1 and not self.always) or sent < self.lines):
            more = start + 100 < len(rows)
            page = {
                "items": [self.item(*e) for e in rows[start : start + 100]],
                "next_cursor": f"o{start + 100}" if more else None,
            }
            await send({"type": "http.response.body", "body": json.dumps(page).encode() + b"\n", "more_body": True})
            start, sent = start + 100, sent + 1
        await send({"type": "http.response.body", "body": b""})


def _entries(endpoint: LateClock, n: int) -> list[str]:
    base = timefmt.now_us() - 60_000_000
    ids = [f"{i:08d}-0000-4000-8000-000000000000" for i in range(n)]
    for i, atom in enumerate(ids):
        endpoint.add(base + i, atom)
    return ids[::-1]


def test_a_stream_that_ends_before_its_last_line_is_asked_again_from_its_last_cursor() -> None:
    endpoint = Cut(lines=2)
    newest_first = _entries(endpoint, 450)
    with serving(endpoint) as server:
        backend = RemoteBackend(server.url, "mk_live_" + "1" * 32, sleep=lambda seconds: None)
        walked = [e.atom_id for fresh in Walk(backend, RecentQuery(limit=100)).pages() for e in fresh]
        backend.close()
    assert walked == newest_first
    assert endpoint.cursors == [None, "o200"]


def test_a_line_over_the_answer_bound_is_refused_and_not_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote_http, "MAX_ANSWER", 1 << 20)
    endpoint = Cut(huge=(1 << 20) + 1)
    _entries(endpoint, 10)
    with serving(endpoint) as server:
        backend = RemoteBackend(server.url, "mk_live_" + "1" * 32, sleep=lambda seconds: None)
        with pytest.raises(Unavailable, match="a line over 1 MiB in its stream; not asked again"):
            list(Walk(backend, RecentQuery(limit=100)).pages())
        backend.close()
    assert endpoint.cursors == [None]


class Paced(LateClock):
    """An endpoint with the stream that sends a line every `pause` seconds, or drips its second line a byte at
    a time (`drip`)."""

    def __init__(self, pause: float, drip: bool = False) -> None:
        super().__init__()
        self.pause, self.drip = pause, drip
        self.requests = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        await read_body(receive)
        self.requests += 1
        rows = sorted(self.entries, reverse=True)
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/x-ndjson")]}
        )
        for start in range(0, len(rows), 10):
            more = start + 10 < len(rows)
            page = {
                "items": [self.item(*e) for e in rows[start : start + 10]],
                "next_cursor": f"o{start + 10}" if more else None,
            }
            line = json.dumps(page).encode() + b"\n"
            if self.drip and start:
                for byte in range(len(line)):
                    await send({"type": "http.response.body", "body": line[byte : byte + 1], "more_body": True})
                    await asyncio.sleep(self.pause)
            else:
                await send({"type": "http.response.body", "body": line, "more_body": True})
                await asyncio.sleep(self.pause)
        await send({"type": "http.response.body", "body": b""})


def test_the_deadline_bounds_each_line_of_a_stream_not_the_whole_walk() -> None:
    # Five lines 0.6 s apart: the walk takes longer than its 2.5 s deadline, while each line comes with
    # nearly 2 s to spare (a margin no load on the machine eats, where 0.4 s against 1 s might be).
    paced = Paced(pause=0.6)
    newest_first = _entries(paced, 50)
    with serving(paced) as server:
        backend = RemoteBackend(server.url, "mk_live_" + "1" * 32, deadline=2.5)
        walked = [e.atom_id for fresh in Walk(backend, RecentQuery(limit=10)).pages() for e in fresh]
        backend.close()
    assert walked == newest_first and paced.requests == 1
    dripping = Paced(pause=0.2, drip=True)
    _entries(dripping, 20)
    with serving(dripping) as server:
        backend = RemoteBackend(server.url, "mk_live_" + "1" * 32, deadline=1.0)
        with pytest.raises(Unavailable, match=r"no whole page from .* stream within the deadline of 1 s"):
            list(Walk(backend, RecentQuery(limit=10)).pages())
        backend.close()
    assert dripping.requests == 1  # a line past its deadline is not asked for again


def test_a_stream_that_keeps_breaking_without_a_page_is_given_up_like_a_request(cli: Callable[..., CliResult]) -> None:
    endpoint = Cut(lines=0, always=True)
    _entries(endpoint, 50)
    with serving(endpoint) as server:
        env = {"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": "mk_live_" + "1" * 32}
        result = cli("recent", "--all", "--format", "ndjson", env=env)
    assert result.code == 5 and result.stdout == ""
    assert "stream from" in result.stderr and "broke 5 time(s) in a row" in result.stderr
    assert "Traceback" not in result.stderr
    assert endpoint.cursors == [None] * 5  # asked again from where it stood, after the retry policy's waits


class Looping(LateClock):
    """An endpoint with the stream whose lines never advance: the first page again and again, same cursor."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        await read_body(receive)
        page = {"items": [self.item(*e) for e in sorted(self.entries, reverse=True)[:10]], "next_cursor": "o10"}
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/x-ndjson")]}
        )
        for _ in range(5):
            await send({"type": "http.response.body", "body": json.dumps(page).encode() + b"\n", "more_body": True})
        await send({"type": "http.response.body", "body": b""})


def test_each_line_of_a_stream_is_held_to_the_walks_checks() -> None:
    looping = Looping()
    _entries(looping, 30)
    with serving(looping) as server:
        backend = RemoteBackend(server.url, "mk_live_" + "1" * 32)
        with pytest.raises(BrokenFeed, match="the same cursor again"):
            list(Walk(backend, RecentQuery(limit=10)).pages())
        backend.close()


class Canonical(LateClock):
    """An endpoint with the stream that says its items are its stored texts (`X-Mnemo-Wire: canonical`), as `mnemo
    serve` does: pages of 10 a line, compact UTF-8 items; `repeat`: each page after the first opens with the last
    entry of the one before; `stale`: the third page is the first again."""

    def __init__(self, repeat: bool = False, stale: bool = False) -> None:
        super().__init__()
        self.repeat, self.stale = repeat, stale

    def item(self, created_at: int, atom_id: str) -> dict[str, Any]:
        return {**super().item(created_at, atom_id), "content": f"café \u202e ✓ {atom_id[:8]}"}

    def text(self, entry: tuple[int, str]) -> str:
        return json.dumps(self.item(*entry), separators=(",", ":"), ensure_ascii=False)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        await read_body(receive)
        rows = sorted(self.entries, reverse=True)
        pages = [rows[start : start + 10] for start in range(0, len(rows), 10)]
        if self.repeat:
            pages = [pages[0]] + [[before[-1], *page] for before, page in pairwise(pages)]
        if self.stale:
            pages[2] = pages[0]
        head = [(b"content-type", b"application/x-ndjson"), (b"x-mnemo-wire", b"canonical")]
        await send({"type": "http.response.start", "status": 200, "headers": head})
        for number, page in enumerate(pages, 1):
            cursor = json.dumps(f"o{number}" if number < len(pages) else None)
            line = '{"items":[' + ",".join(map(self.text, page)) + '],"next_cursor":' + cursor + "}\n"
            await send({"type": "http.response.body", "body": line.encode(), "more_body": True})
        await send({"type": "http.response.body", "body": b""})


def test_a_canonical_stream_prints_each_entry_once_as_it_came(cli: Callable[..., CliResult]) -> None:
    # Each line of `mnemo serve`'s stream is read as its items' texts (`TextPage`) and printed as those bytes;
    # a page that repeats an entry (at the page boundary) has that entry dropped, as a page of entries would.
    endpoint = Canonical(repeat=True)
    newest_first = _entries(endpoint, 35)
    expected = [endpoint.text(e) for e in sorted(endpoint.entries, reverse=True)]
    with serving(endpoint) as server:
        backend = RemoteBackend(server.url, "mk_live_" + "1" * 32)
        chunks = list(stream_wire(backend, RecentQuery()))
        backend.close()
        env = {"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": "mk_live_" + "1" * 32}
        ndjson = cli("recent", "--all", "--format", "ndjson", env=env)
        document = cli("recent", "--all", "--format", "json", env=env)
        reverse = cli("recent", "--all", "--reverse", "--format", "ndjson", env=env)
    assert [type(c).__name__ for c in chunks] == ["TextPage", "list", "list", "list"]  # pages 2-4 dropped a repeat
    assert [w for c in chunks for w in c] == expected
    assert ndjson.code == 0 and ndjson.stdout.splitlines() == expected, ndjson.stderr
    assert [json.loads(line)["atom_id"] for line in ndjson.stdout.splitlines()] == newest_first
    assert document.code == 0 and json.loads(document.stdout)["items"] == [json.loads(t) for t in expected]
    assert reverse.code == 0 and reverse.stdout.splitlines() == expected[::-1]


def test_every_page_of_a_canonical_stream_is_printed_whole_when_nothing_repeats() -> None:
    endpoint = Canonical()
    _entries(endpoint, 35)
    expected = [endpoint.text(e) for e in sorted(endpoint.entries, reverse=True)]
    with serving(endpoint) as server:
        backend = RemoteBackend(server.url, "mk_live_" + "1" * 32)
        chunks = list(stream_wire(backend, RecentQuery()))
        backend.close()
    assert [type(c).__name__ for c in chunks] == ["TextPage"] * 4
    assert (
        b"".join(c.ndjson() for c in chunks if not isinstance(c, list)) == "".join(t + "\n" for t in expected).encode()
    )


def test_a_canonical_page_not_older_than_the_one_before_stops_the_walk_before_it_is_printed(
    cli: Callable[..., CliResult],
) -> None:
    endpoint = Canonical(stale=True)
    _entries(endpoint, 35)
    expected = [endpoint.text(e) for e in sorted(endpoint.entries, reverse=True)]
    with serving(endpoint) as server:
        env = {"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": "mk_live_" + "1" * 32}
        result = cli("recent", "--all", "--format", "ndjson", env=env)
    assert result.code == 5 and "not older than the one before" in result.stderr, result.stderr
    assert result.stdout.splitlines() == expected[:20]  # the first two pages, and nothing of the third


def test_hostile_text_over_mnemo_serve_is_printed_as_the_embedded_walk_prints_it(
    isolated_home: Path, cli: Callable[..., CliResult]
) -> None:
    # Piped: the same bytes as the embedded walk (UTF-8 as stored, never re-encoded); on a terminal: what a
    # terminal acts on escaped (a C1 CSI, a bidi override, a line separator), the same JSON values.
    store = Store(isolated_home / "store.db")
    key = store.create_key("alice")[1]
    hostile = ["evil \u202e reversed \x9b31m and \u2028 split", "café ✓ 𝄞", 'quote " and \\ back', "plain"]
    rows = [
        ("alice", WriteRequest(content=text, domain="notes"), timefmt.now_us() - 1000 + i)
        for i, text in enumerate(hostile * 40)
    ]
    store.bulk_insert(rows)
    embedded = [line for chunk in stream_wire(LocalBackend(store, "alice"), RecentQuery()) for line in chunk]
    store.close()
    served = start_serve(isolated_home)
    try:
        env = {"MNEMO_ENDPOINT": served.url, "MNEMO_API_KEY": key}
        piped = cli("recent", "--all", "--format", "ndjson", env=env)
        document = cli("recent", "--all", "--format", "json", env=env)
        shown = on_terminal([MNEMO, "recent", "--all", "--format", "ndjson"], env=terminal_env(isolated_home, **env))
        backend = RemoteBackend(served.url, key)
        chunks = list(stream_wire(backend, RecentQuery()))
        backend.close()
    finally:
        served.stop()
    # Every line of the server's stream is laid out as the client reads it whole (docs/server.md, "A feed page on
    # the wire", rule 4): a change of that layout is a walk read item by item, several times slower.
    assert [type(c).__name__ for c in chunks] == ["TextPage"] * 2 and [w for c in chunks for w in c] == embedded
    assert piped.code == 0 and piped.stdout.split("\n") == [*embedded, ""], piped.stderr
    assert document.code == 0 and json.loads(document.stdout)["items"] == [json.loads(line) for line in embedded]
    assert shown.code == 0, shown.stderr
    assert "\u202e" not in shown.stdout and "\x9b" not in shown.stdout and "\u2028" not in shown.stdout
    assert [json.loads(line) for line in shown.stdout.split("\n") if line] == [json.loads(line) for line in embedded]
