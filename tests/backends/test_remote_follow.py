"""The push follow's client (docs/server.md, "Push follow") against servers that misbehave on purpose, byte by byte."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mnemo_tui.backends import remote_follow
from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.errors import AuthError, Forbidden, RemovalsGone, Unavailable
from mnemo_tui.values.model import RecentQuery
from tests.backends.sse_servers import SSE_HEAD, Handler, RawServer, event, hang, item
from tests.support.cli import MNEMO

KEY = "mk_live_" + "7" * 32


@contextmanager
def raw(handler: Handler) -> Iterator[RawServer]:
    server = RawServer(handler)
    try:
        yield server
    finally:
        server.close()


@contextmanager
def backend(url: str) -> Iterator[RemoteBackend]:
    remote = RemoteBackend(url, KEY, retries=2, sleep=lambda seconds: None)
    try:
        yield remote
    finally:
        remote.close()


def test_headers_then_nothing_is_a_dead_stream_asked_again_from_the_last_position(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(remote_follow, "IDLE_SECONDS", 0.5)

    async def answer(n: int, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + b"retry: 2000\n\n")
        if n == 0:
            writer.write(event("entries", "41", {"items": [item(2), item(1)]}))
        else:
            writer.write(event("entries", "42", {"items": [item(3)]}))
        await writer.drain()
        await hang()  # headers, an event, then nothing: no byte for the idle deadline

    with raw(answer) as server, backend(server.url) as remote:
        follow = remote.follow(RecentQuery(limit=2))
        assert follow is not None
        try:
            first = next(follow)
            assert [e.content for e in first.entries] == ["pushed 2", "pushed 1"]
            again = next(follow)  # only after the idle deadline dropped the first connection
            assert isinstance(follow, remote_follow.RemoteFollow) and follow.connections == 2
        finally:
            follow.close()
    assert again.kind == "entries" and [e.content for e in again.entries] == ["pushed 3"]
    assert len(server.requests) == 2
    assert "last-event-id" not in server.requests[0][1]
    assert server.requests[1][1]["last-event-id"] == "41"
    assert server.requests[0][0].startswith("POST /api/v1/memory/follow ")


def test_an_endpoint_without_the_channel_is_none_and_asked_once() -> None:
    async def answer(n: int, writer: asyncio.StreamWriter) -> None:
        body = b'{"detail":"Not Found"}'
        writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\n")
        writer.write(b"content-length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()

    with raw(answer) as server, backend(server.url) as remote:
        assert remote.follow(RecentQuery()) is None
        assert remote.follow(RecentQuery(scope="general")) is None
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("code", "status", "error"), [("REMOVALS_GONE", 410, RemovalsGone), ("FORBIDDEN", 403, Forbidden)]
)
def test_an_error_event_is_the_projects_error(code: str, status: int, error: type[Exception]) -> None:
    async def answer(n: int, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + event("entries", "5", {"items": []}))
        envelope = {"code": code, "message": f"{code} said the server", "retryable": False, "details": None}
        writer.write(b"event: error\ndata: " + json.dumps({"error": envelope}).encode() + b"\n\n")
        await writer.drain()

    with raw(answer) as server, backend(server.url) as remote:
        follow = remote.follow(RecentQuery(), position="4")
        assert follow is not None
        assert next(follow).entries == []
        with pytest.raises(error, match=f"{code} said the server"):
            next(follow)
        follow.close()
    assert server.requests[0][1]["last-event-id"] == "4"


def test_a_wake_in_chunks_comes_oldest_part_first_each_newest_first() -> None:
    """A wake of 230 entries as the server sends it: 100 + 100 + 30, oldest part first, each with the position
    it completes; each is yielded as it comes, its entries newest first (the feed's order, chunk by chunk)."""
    numbers = list(range(1, 231))
    chunks = [numbers[:100], numbers[100:200], numbers[200:]]

    async def answer(n: int, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + event("entries", "1", {"items": []}))
        for chunk in chunks:
            writer.write(event("entries", str(chunk[-1] + 1), {"items": [item(i) for i in reversed(chunk)]}))
        writer.write(event("heartbeat", "231", {}))
        await writer.drain()
        await hang()

    with raw(answer) as server, backend(server.url) as remote:
        follow = remote.follow(RecentQuery())
        assert follow is not None
        try:
            got = [next(follow) for _ in range(5)]
        finally:
            follow.close()
    assert got[0].entries == [] and got[0].position == "1"
    for pushed, chunk in zip(got[1:4], chunks, strict=True):
        assert [e.content for e in pushed.entries] == [f"pushed {i}" for i in reversed(chunk)]
        assert pushed.position == str(chunk[-1] + 1)
    assert got[4].kind == "heartbeat" and follow.position == "231"


def test_close_from_another_thread_ends_a_waiting_read() -> None:
    import threading

    async def answer(n: int, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + event("entries", "1", {"items": [item(1)]}))
        await writer.drain()
        await hang()

    with raw(answer) as server, backend(server.url) as remote:
        follow = remote.follow(RecentQuery())
        assert follow is not None
        got: list[object] = []
        reader = threading.Thread(target=lambda: got.extend(follow), daemon=True)
        reader.start()
        for _ in range(6000):  # bounded (60 s), for a loaded machine; the event comes at once
            if got:
                break
            reader.join(0.01)
        else:
            raise AssertionError("the first event never came")
        follow.close()
        reader.join(timeout=10)
        assert not reader.is_alive()  # ended by close(), not by the 45 s idle deadline
    assert len(got) == 1 and len(server.requests) == 1


def test_an_event_over_the_bound_ends_recent_follow_with_a_clear_error(tmp_path: Path) -> None:
    async def answer(n: int, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + b"event: entries\nid: 3\ndata: ")
        block = b"x" * (1 << 20)
        for _ in range(33):  # 33 MiB on one line, never a line end
            writer.write(block)
            await writer.drain()
        await hang()

    with raw(answer) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
        env.update(MNEMO_HOME=str(tmp_path), MNEMO_ENDPOINT=server.url, MNEMO_API_KEY=KEY, NO_COLOR="1")
        done = subprocess.run(
            [MNEMO, "recent", "--follow", "--format", "ndjson"], capture_output=True, text=True, env=env, timeout=120
        )
    assert done.returncode == 5, done.stderr
    assert "an event over 32 MiB" in done.stderr and "not asked again" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert len(server.requests) == 1


def test_a_follow_that_is_not_persistent_gives_up_after_the_deadline() -> None:
    # The TUI's follow: it falls back to polling, and says so, after the deadline; `recent -F` sets
    # `persistent` and never gives up on an outage (tests/backends/test_follow_outage.py).
    async def answer(n: int, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + event("entries", "8", {"items": [item(1)]}))
        await writer.drain()
        await hang()

    server = RawServer(answer)
    remote = RemoteBackend(server.url, KEY, deadline=2)
    try:
        follow = remote.follow(RecentQuery())
        assert isinstance(follow, remote_follow.RemoteFollow) and not follow.persistent
        assert [e.content for e in next(follow).entries] == ["pushed 1"]
        server.close()  # the stream drops, and every reconnect is refused from now on
        with pytest.raises(Unavailable, match="cannot reconnect the follow to"):
            next(follow)
        follow.close()
    finally:
        remote.close()
    assert len(server.requests) == 1


def test_a_persistent_follow_says_the_outage_goes_on_at_doubling_intervals() -> None:
    async def answer(n: int, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + event("entries", "8", {"items": [item(1)]}))
        await writer.drain()
        await hang()

    server = RawServer(answer)
    remote = RemoteBackend(server.url, KEY, deadline=1)
    heard: list[str | None] = []
    try:
        follow = remote.follow(RecentQuery())
        assert isinstance(follow, remote_follow.RemoteFollow)
        follow.persistent = True
        assert follow.reconnect_cap == 1.0  # capped by the deadline when it is the shorter

        def tell(reason: str | None) -> None:
            heard.append(reason)
            if len(heard) >= 4:
                follow.close()  # as ^C would

        follow.on_connection = tell
        # Before the stream opens: whenever the follow's own outage clock starts (at the drop, or at the last
        # thing it heard), it starts after this, so the time to the end bounds every "for N s" it said.
        started = time.monotonic()
        assert [e.content for e in next(follow).entries] == ["pushed 1"]
        server.close()
        assert list(follow) == []  # ended by close(), never by an error
        lasted = time.monotonic() - started
    finally:
        remote.close()
    assert heard[0] == "the endpoint ended the stream" or "connection" in str(heard[0])
    seconds = [int(str(h).rsplit("for ", 1)[1].split(" s")[0]) for h in heard[1:]]
    assert all(b >= 2 * a - 1 for a, b in itertools.pairwise(seconds)) and seconds[0] >= 1
    assert lasted >= seconds[-1] - 0.5  # each "for N s" is the time down, rounded to the second


def test_a_retryable_error_event_is_asked_again_from_the_last_position() -> None:
    async def answer(n: int, writer: asyncio.StreamWriter) -> None:
        if n == 0:
            envelope = {"code": "UNAVAILABLE", "message": "store unavailable", "retryable": True, "details": None}
            writer.write(SSE_HEAD + event("entries", "3", {"items": [item(1)]}))
            writer.write(b"event: error\ndata: " + json.dumps({"error": envelope}).encode() + b"\n\n")
        else:
            writer.write(SSE_HEAD + event("heartbeat", "4", {}))
        await writer.drain()
        if n:
            await hang()

    with raw(answer) as server, backend(server.url) as remote:
        follow = remote.follow(RecentQuery())
        assert follow is not None
        try:
            assert [e.content for e in next(follow).entries] == ["pushed 1"]
            assert next(follow).kind == "heartbeat"
        finally:
            follow.close()
    assert len(server.requests) == 2 and server.requests[1][1]["last-event-id"] == "3"


def test_an_outage_is_told_when_the_stream_drops_and_again_before_the_first_event_after_it() -> None:
    async def answer(n: int, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + event("entries", str(n + 1), {"items": [item(n + 1)]}))
        await writer.drain()
        if n:
            await hang()
        # else the connection closes after its event: the stream ended, and is asked again

    heard: list[object] = []
    with raw(answer) as server, backend(server.url) as remote:
        follow = remote.follow(RecentQuery())
        assert isinstance(follow, remote_follow.RemoteFollow)
        follow.on_connection = heard.append
        try:
            first = next(follow)
            assert heard == []
            second = next(follow)
        finally:
            follow.close()
    assert [e.content for e in first.entries + second.entries] == ["pushed 1", "pushed 2"]
    # Told once each, in order: the drop with its reason, then back (before the event it brought was handed on).
    assert heard == ["the endpoint ended the stream", None]
    assert server.requests[1][1]["last-event-id"] == "1"


def test_recent_follow_tells_the_outage_and_the_return_on_stderr_and_reconnects_until_stopped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mnemo_tui.cli.follow import tell_outages

    monkeypatch.setenv("MNEMO_DEADLINE", "60")  # the backend below was given its own

    async def answer(n: int, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + event("entries", str(n + 1), {"items": [item(n + 1)]}))
        await writer.drain()
        if n:
            await hang()
        # else the connection closes after its event: the stream ended, and is asked again

    with raw(answer) as server:
        remote = RemoteBackend(server.url, KEY, retries=2, sleep=lambda seconds: None, deadline=7)
        try:
            follow = remote.follow(RecentQuery())
            assert follow is not None
            tell_outages(follow, remote.identity)
            assert follow.persistent
            try:
                next(follow)
                next(follow)
            finally:
                follow.close()
        finally:
            remote.close()
    told = capsys.readouterr().err.splitlines()
    assert told == [
        f"mnemo: the follow's stream from {server.url} dropped (the endpoint ended the stream); "
        "reconnecting until it answers (^C to stop)...",
        f"mnemo: the follow reconnected to {server.url}; resuming where it stopped",
    ]


def test_close_ends_a_reconnect_waiting_in_its_backoff() -> None:
    import threading

    async def answer(n: int, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + event("entries", "1", {"items": [item(1)]}))
        await writer.drain()  # then the connection closes: the follow waits its backoff to reconnect

    with raw(answer) as server:
        remote = RemoteBackend(server.url, KEY, backoff=60.0)  # a first wait of 30 s (max_wait)
        try:
            follow = remote.follow(RecentQuery())
            assert isinstance(follow, remote_follow.RemoteFollow)
            got: list[object] = []
            reader = threading.Thread(target=lambda: got.extend(follow), daemon=True)
            reader.start()
            for _ in range(6000):  # bounded (60 s), for a loaded machine
                if got and follow._stream is None:  # the stream ended: it waits to reconnect
                    break
                reader.join(0.01)
            else:
                raise AssertionError("the follow never came to wait for its reconnect")
            follow.close()
            reader.join(timeout=10)
            assert not reader.is_alive()  # woken by close(), not after its 30 s wait
        finally:
            remote.close()
    assert len(got) == 1 and len(server.requests) == 1


def test_a_stream_that_ends_is_told_to_on_connection_before_the_reconnect_waits() -> None:
    import threading

    async def answer(n: int, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + event("entries", "1", {"items": [item(1)]}))
        await writer.drain()  # then the connection closes: the follow waits its backoff to reconnect

    with raw(answer) as server:
        remote = RemoteBackend(server.url, KEY, backoff=60.0)  # a first wait of 30 s (max_wait)
        try:
            follow = remote.follow(RecentQuery())
            assert follow is not None
            why: list[str | None] = []
            dropped = threading.Event()
            follow.on_connection = lambda reason: (why.append(reason), dropped.set())
            reader = threading.Thread(target=lambda: list(follow), daemon=True)
            reader.start()
            assert dropped.wait(10)  # at once, not after the wait before the reconnect
            follow.close()
            reader.join(timeout=10)
        finally:
            remote.close()
    assert why == ["the endpoint ended the stream"] and len(server.requests) == 1


def refusal(status: bytes, body: bytes) -> Handler:
    """An endpoint refusing the follow with `status` and a JSON `body`."""

    async def answer(n: int, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\n")
        writer.write(b"content-length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()

    return answer


def test_a_refused_follow_says_the_endpoints_words_on_a_host_up_for_weeks(monkeypatch: pytest.MonkeyPatch) -> None:
    # The monotonic clock counts from boot: 30 days up, it is far past any number of bytes taken for an instant.
    since_boot = time.monotonic
    monkeypatch.setattr(time, "monotonic", lambda: since_boot() + 30 * 86_400)
    body = json.dumps({"code": "AUTH_INVALID", "message": "that key was revoked", "retryable": False}).encode()
    refused = pytest.raises(AuthError, match="that key was revoked")
    with raw(refusal(b"401 Unauthorized", body)) as server, backend(server.url) as remote, refused:
        remote.follow(RecentQuery())
    assert len(server.requests) == 1  # a refusal is not asked again


def test_a_refusal_beyond_its_bound_is_not_read_whole() -> None:
    body = json.dumps({"message": "x" * remote_follow.MAX_REFUSAL}).encode()
    unread = pytest.raises(Unavailable, match="HTTP 401 and no readable body")
    with raw(refusal(b"401 Unauthorized", body)) as server, backend(server.url) as remote, unread:
        remote.follow(RecentQuery())
    assert len(server.requests) == 3  # unreadable, so asked again as the retry policy says (retries=2)
