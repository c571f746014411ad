"""Feed subscriptions over MCP at `/mcp` of a real `mnemo serve`, driven by the official `mcp` client in both
revisions: 2025-11-25 `resources/subscribe` (the notification on the session's event stream) and 2026-07-28
`subscriptions/listen`; a notification for the URI exactly as subscribed, none for another scope, none after
unsubscribe or revocation, the bounds' refusals; and across two servers over one PostgreSQL (LISTEN).

"None" is never waited for: a write to the scope that must stay silent comes first, then one to a scope that
must be heard, twice, each awaited; a listener's notifications go out in order, so one for the silent write
would have come before the second."""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import time
import warnings
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mnemo_tui.server.mcp_mount import MAX_SUBSCRIPTIONS_PER_KEY
from tests.support.mcp_client import MNEMO, WAIT, Heard, http_client
from tests.support.serve import ServeProcess, start_serve

warnings.filterwarnings("ignore", message=".*resources/(un)?subscribe is removed.*")
NOT_FOUND = -32002


def mnemo(home: Path, *args: str) -> str:
    env = {"PATH": "/usr/bin:/bin", "MNEMO_HOME": str(home), "NO_COLOR": "1"}
    return subprocess.run([MNEMO, *args], env=env, capture_output=True, text=True, check=True).stdout.strip()


class Server:
    """One `mnemo serve` and the clients connected to its `/mcp`."""

    def __init__(self, process: ServeProcess, portal: BlockingPortal, stack: ExitStack) -> None:
        self.process, self.portal, self.stack = process, portal, stack
        self.url = process.url.removesuffix("/api/v1") + "/mcp"

    def client(self, mode: str, key: str, heard: Heard | None = None) -> Client:
        http = http_client(headers={"authorization": f"Bearer {key}"})
        client = Client(
            streamable_http_client(self.url, http_client=http),  # type: ignore[arg-type]
            mode=mode,
            message_handler=heard,
        )
        entered: Client = self.stack.enter_context(self.portal.wrap_async_context_manager(client))
        return entered

    def write(self, client: Client, content: str, domain: str) -> None:
        result = self.portal.call(client.call_tool, "memory_write", {"content": content, "domain": domain})
        assert not result.is_error, result.content

    def subscribe(self, client: Client, uri: str) -> None:
        self.portal.call(client.subscribe_resource, uri)

    def listen(self, client: Client, *uris: str) -> Listening:
        return Listening(self, client, uris)


class Listening:
    """One `subscriptions/listen` stream of a client, its events gathered in a queue until it ends."""

    END = "(ended)"

    def __init__(self, server: Server, client: Client, uris: tuple[str, ...]) -> None:
        self.uris: queue.Queue[str] = queue.Queue()
        self.acked: queue.Queue[object] = queue.Queue()
        self.portal = server.portal
        self.future = server.portal.start_task_soon(self._run, client, uris)
        honored = self.acked.get(timeout=WAIT)
        if isinstance(honored, BaseException):
            raise honored
        self.honored = honored

    async def _run(self, client: Client, uris: tuple[str, ...]) -> None:
        try:
            async with client.listen(resource_subscriptions=uris) as subscription:
                self.acked.put(subscription.honored)
                async for event in subscription:
                    self.uris.put(event.uri)  # type: ignore[union-attr]
        except BaseException as exc:
            self.acked.put(exc)
            raise
        finally:
            self.uris.put(self.END)

    def next(self) -> str:
        return self.uris.get(timeout=WAIT)

    def stop(self) -> None:
        self.future.cancel()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-subscriptions")


@pytest.fixture(scope="module")
def keys(home: Path) -> dict[str, str]:
    return {name: mnemo(home, "keys", "create", name.split("-")[0]) for name in ("alice", "alice-2", "bob")}


@pytest.fixture(scope="module")
def server(home: Path, keys: dict[str, str]) -> Iterator[Server]:
    process = start_serve(home)
    try:
        with ExitStack() as stack:
            portal = stack.enter_context(start_blocking_portal())
            yield Server(process, portal, stack)
    finally:
        process.stop(signal.SIGTERM)


def key_id(home: Path, key: str, server: Server) -> str:
    answer = httpx.get(server.process.url + "/mnemo/whoami", headers={"X-Api-Key": key}, timeout=30)
    assert answer.status_code == 200, answer.text
    found: str = answer.json()["key_id"]
    return found


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_capability_is_advertised_in_both_revisions(server: Server, keys: dict[str, str], mode: str) -> None:
    client = server.client(mode, keys["alice"])
    assert client.server_capabilities.resources is not None
    assert client.server_capabilities.resources.subscribe is True


def test_a_session_hears_its_feed_by_the_uri_as_subscribed_and_not_another_scope(
    server: Server, keys: dict[str, str]
) -> None:
    heard = Heard()
    client = server.client("legacy", keys["alice"], heard)
    uri, sentinel = "memory://feed/team%2Fsubs", "memory://feed/sentinel"
    server.subscribe(client, uri)
    server.subscribe(client, uri)  # again: still one subscription
    server.subscribe(client, sentinel)
    page = json.loads(server.portal.call(client.read_resource, uri).contents[0].text)
    assert page["items"] == []
    server.write(client, "somewhere else", "team")  # another scope (its parent's name): silent
    for n in range(2):
        server.write(client, f"sentinel {n}", "sentinel")
        assert heard.next() == sentinel
    server.write(client, "here", "team/subs")
    assert heard.next() == uri  # exactly as subscribed (percent-encoded)
    page = json.loads(server.portal.call(client.read_resource, uri).contents[0].text)
    assert [i["content"] for i in page["items"]] == ["here"]


def test_the_own_feed_hears_every_domain_and_nothing_after_unsubscribe(server: Server, keys: dict[str, str]) -> None:
    heard = Heard()
    client = server.client("legacy", keys["bob"], heard)
    server.subscribe(client, "memory://feed")
    server.subscribe(client, "memory://feed/quiet")
    server.write(client, "anywhere", "loud")
    assert heard.next() == "memory://feed"
    server.portal.call(client.unsubscribe_resource, "memory://feed/quiet")
    server.write(client, "not heard", "quiet")  # the own feed hears it; the unsubscribed scope does not
    assert heard.next() == "memory://feed"
    server.write(client, "again", "loud")
    assert heard.next() == "memory://feed"
    assert heard.empty()


def test_a_scope_the_key_cannot_read_is_refused_at_subscribe_time(server: Server, keys: dict[str, str]) -> None:
    alice = server.client("legacy", keys["alice"])
    room = server.portal.call(alice.call_tool, "memory_create_room", {"name": "subs"}).structured_content
    bob = server.client("legacy", keys["bob"])
    for uri in (f"memory://feed/xroom%3A{room['room_id']}", "memory://item/x", "memory://feed/a/b"):
        with pytest.raises(MCPError) as refused:
            server.subscribe(bob, uri)
        assert refused.value.code == NOT_FOUND, uri
    with pytest.raises(MCPError) as stranger:
        Listening(server, server.client("auto", keys["bob"]), (f"memory://feed/xroom%3A{room['room_id']}",))
    assert stranger.value.code == NOT_FOUND


def test_a_listen_stream_hears_its_uris_and_not_another_scope(server: Server, keys: dict[str, str]) -> None:
    client = server.client("auto", keys["alice"])
    uri, sentinel = "memory://feed/listened", "memory://feed/listened-sentinel"
    stream = server.listen(client, uri, sentinel)
    assert stream.honored.resource_subscriptions == [uri, sentinel]
    server.write(client, "elsewhere", "unlistened")
    for n in range(2):
        server.write(client, f"sentinel {n}", "listened-sentinel")
        assert stream.next() == sentinel
    server.write(client, "heard", "listened")
    assert stream.next() == uri
    stream.stop()


def test_a_room_is_heard_by_its_member(server: Server, keys: dict[str, str]) -> None:
    alice = server.client("auto", keys["alice"])
    room = server.portal.call(alice.call_tool, "memory_create_room", {"name": "heard"}).structured_content
    uri = f"memory://feed/xroom:{room['room_id']}"
    stream = server.listen(alice, uri)
    server.write(alice, "for the room", f"xroom:{room['room_id']}")
    assert stream.next() == uri
    stream.stop()


def test_a_revoked_key_hears_nothing_more_and_its_listen_stream_ends(
    home: Path, server: Server, keys: dict[str, str]
) -> None:
    revoked = mnemo(home, "keys", "create", "carol")
    other = mnemo(home, "keys", "create", "carol")
    heard, witness = Heard(), Heard()
    session = server.client("legacy", revoked, heard)
    server.subscribe(session, "memory://feed")
    stream = server.listen(server.client("auto", revoked), "memory://feed")
    writer = server.client("legacy", other, witness)
    server.subscribe(writer, "memory://feed")
    server.write(writer, "before", "d")
    assert heard.next() == "memory://feed" and witness.next() == "memory://feed"
    assert stream.next() == "memory://feed"
    held, queued = feed_metrics(server, other)
    mnemo(home, "keys", "revoke", key_id(home, revoked, server))
    server.write(writer, "after", "d")  # through this server: its wake-up looks the keys up again
    assert stream.next() == Listening.END  # ended gracefully (the client's loop ends, no SubscriptionLost)
    assert witness.next() == "memory://feed"
    server.write(writer, "after again", "d")
    assert witness.next() == "memory://feed"
    # The server's own count, read once the witness heard both writes (each queued in the wake-up that heard its
    # write, after the keys were looked up): the revoked key's two subscriptions are gone, and of the writes since
    # the revocation only the witness's two updates were queued, none for the revoked session or its stream.
    assert feed_metrics(server, other) == (held - 2, queued + 2)
    assert heard.empty()


def feed_metrics(server: Server, key: str) -> tuple[int, int]:
    """The server's `/metrics`: the feed subscriptions held now, and the updates queued so far."""
    text = httpx.get(server.process.url.removesuffix("/api/v1") + "/metrics", headers={"X-Api-Key": key}, timeout=30)
    assert text.status_code == 200, text.text
    found = dict(re.findall(r"^(mnemo_feed_subscriptions|mnemo_feed_updates_total) (\S+)$", text.text, re.MULTILINE))
    return int(float(found["mnemo_feed_subscriptions"])), int(float(found["mnemo_feed_updates_total"]))


def test_subscriptions_past_a_keys_bound_are_refused_429_with_retry_after(
    home: Path, server: Server, keys: dict[str, str]
) -> None:
    key = mnemo(home, "keys", "create", "dave")
    client = server.client("legacy", key)
    for n in range(MAX_SUBSCRIPTIONS_PER_KEY):
        server.subscribe(client, f"memory://feed/d{n}")
    session = client.session
    assert session is not None
    with pytest.raises(MCPError):
        server.subscribe(client, "memory://feed/one-more")
    raw = httpx.post(
        server.url,
        headers={
            "authorization": f"Bearer {key}",
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": "2026-07-28",
        },
        content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": {}}),
        timeout=30,
    )
    assert raw.status_code == 429 and raw.headers["retry-after"] == "1", raw.text
    assert "TOO_MANY_SUBSCRIPTIONS" in raw.json()["error"]["message"]
    server.portal.call(client.unsubscribe_resource, "memory://feed/d0")
    server.subscribe(client, "memory://feed/one-more")  # a slot freed by unsubscribe


@pytest.fixture(scope="module", params=["none", "transaction"])
def two_servers(
    pg_databases: Any, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[tuple[str, str, list[Server]]]:
    """The database's URL, two `mnemo serve` over it, and a key of both: LISTENing (`--database-pooler none`),
    or as behind a transaction pooler (no LISTEN: the hub's slow poll wakes B)."""
    from mnemo_tui.engine.postgres.store import PgStore

    url = pg_databases.cluster.url(pg_databases.create())
    admin = PgStore(url)
    try:
        key = admin.create_key("team")[1]
    finally:
        admin.close()
    homes = tmp_path_factory.mktemp("mcp-pg")
    processes: list[ServeProcess] = []
    try:
        with ExitStack() as stack:
            portal = stack.enter_context(start_blocking_portal())
            for i in range(2):
                (homes / f"s{i}").mkdir()
                pooler = ("--database-pooler", request.param)
                processes.append(start_serve(homes / f"s{i}", "--database", url, *pooler))
            yield url, key, [Server(p, portal, stack) for p in processes]
    finally:
        for process in processes:
            process.stop(signal.SIGTERM)


def test_a_write_on_one_server_is_heard_by_a_subscriber_on_another_over_postgresql(
    two_servers: tuple[str, str, list[Server]],
) -> None:
    _, key, (a, b) = two_servers
    heard = Heard()
    session = b.client("legacy", key, heard)
    uri, sentinel = "memory://feed/across", "memory://feed/across-sentinel"
    b.subscribe(session, uri)
    b.subscribe(session, sentinel)
    stream = b.listen(b.client("auto", key), uri, sentinel)
    writer = a.client("legacy", key)
    a.write(writer, "elsewhere", "across-other")  # another scope: silent on both
    for n in range(2):
        a.write(writer, f"sentinel {n}", "across-sentinel")
        assert heard.next() == sentinel and stream.next() == sentinel
    a.write(writer, "written on A", "across")
    assert heard.next() == uri and stream.next() == uri
    page = json.loads(b.portal.call(session.read_resource, uri).contents[0].text)
    assert [i["content"] for i in page["items"]] == ["written on A"]
    b.portal.call(session.unsubscribe_resource, uri)
    a.write(writer, "unheard by the session", "across")
    assert stream.next() == uri  # the listen stream still hears it
    a.write(writer, "sentinel again", "across-sentinel")
    assert heard.next() == sentinel  # the session, unsubscribed from `uri`, heard only the sentinel
    stream.stop()


def test_a_sessions_end_and_a_listen_streams_end_free_their_subscriptions(
    home: Path, server: Server, keys: dict[str, str]
) -> None:
    key = mnemo(home, "keys", "create", "erin")
    with ExitStack() as stack:
        held = Server(server.process, server.portal, stack)
        client = held.client("legacy", key)
        for n in range(MAX_SUBSCRIPTIONS_PER_KEY):
            held.subscribe(client, f"memory://feed/e{n}")
        with pytest.raises(MCPError):
            held.subscribe(client, "memory://feed/full")
    # The session ended (the client's DELETE): its subscriptions are freed as its server task winds down.
    after = server.client("legacy", key)
    for n in range(MAX_SUBSCRIPTIONS_PER_KEY):
        eventually(lambda n=n: server.subscribe(after, f"memory://feed/e{n}"))  # type: ignore[misc]
    streamer = server.client("auto", keys["bob"])
    for _ in range(3):  # each stream's end frees its subscriptions: more streams than one key's bound holds
        stream = eventually(lambda: server.listen(streamer, *[f"memory://feed/s{n}" for n in range(40)]))
        stream.stop()
        assert stream.next() == Listening.END


def eventually(attempt: Any) -> Any:
    """`attempt()`, again while it is refused (a slot freed a moment later), within WAIT seconds."""
    deadline = time.monotonic() + WAIT
    while True:
        try:
            return attempt()
        except Exception:
            if time.monotonic() > deadline:
                raise


def test_a_membership_that_ended_hears_nothing_more_of_the_room(server: Server, keys: dict[str, str]) -> None:
    alice = server.client("legacy", keys["alice"])
    call = server.portal.call
    room = call(alice.call_tool, "memory_create_room", {"name": "ending"}).structured_content
    room_id = room["room_id"]
    invite = call(alice.call_tool, "memory_invite_to_room", {"room_id": room_id}).structured_content
    heard = Heard()
    bob = server.client("legacy", keys["bob"], heard)
    joined = call(bob.call_tool, "memory_join_room", {"code": invite["code"]})
    assert not joined.is_error, joined.content
    uri, sentinel = f"memory://feed/xroom%3A{room_id}", "memory://feed/bob-sentinel"
    server.subscribe(bob, uri)
    server.subscribe(bob, sentinel)
    server.write(alice, "while a member", f"xroom:{room_id}")
    assert heard.next() == uri
    deleted = httpx.delete(
        f"{server.process.url}/memory/rooms/{room_id}", headers={"X-Api-Key": keys["alice"]}, timeout=30
    )
    assert deleted.status_code == 200, deleted.text  # its entries leave: no more of it is bob's to read
    for n in range(2):
        server.write(bob, f"sentinel {n}", "bob-sentinel")
        assert heard.next() == sentinel
    with pytest.raises(MCPError) as gone:
        server.subscribe(bob, uri)
    assert gone.value.code == NOT_FOUND


def test_a_key_revoked_elsewhere_ends_its_listen_stream_on_another_server(
    two_servers: tuple[str, str, list[Server]],
) -> None:
    from mnemo_tui.engine.postgres.store import PgStore

    url, key, (a, b) = two_servers
    admin = PgStore(url)
    try:
        key_id, revoked = admin.create_key("team")
        stream = b.listen(b.client("auto", revoked), "memory://feed")
        admin.revoke_key(key_id)
    finally:
        admin.close()
    a.write(a.client("legacy", key), "after the revocation", "revoked-elsewhere")  # wakes B: it looks the keys up
    assert stream.next() == Listening.END
