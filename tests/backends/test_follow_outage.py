"""`mnemo recent -F` against a real `mnemo serve` outlives an outage longer than its deadline: it says so on
stderr, reconnects until the server is back on the same port, and goes on with nothing lost or repeated."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.writes import WriteRequest
from tests.support.follow import Follower
from tests.support.serve import start_serve


def _write(url: str, key: str, text: str) -> str:
    answer = httpx.post(url + "/memory/write", json={"content": text, "domain": "ops"}, headers={"X-Api-Key": key})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["atom_id"])


def _down_for(stderr: str) -> int:
    """The longest outage the follower has said it is still in, in seconds (0: none said)."""
    return max((int(m) for m in re.findall(r"is still down \(.*, for (\d+) s\)", stderr)), default=0)


def test_recent_follow_reconnects_past_the_deadline_and_loses_nothing(
    cli: Any, isolated_home: Path, tmp_path: Path
) -> None:
    key = cli("keys", "create", "alice").stdout.strip()
    served = start_serve(isolated_home)
    port = int(served.url.rsplit(":", 1)[1].split("/")[0])
    before = [_write(served.url, key, f"before {i}") for i in range(2)]
    # A deadline of 1 s: the follow of before gave up (exit 5) after one second without the server.
    env = {"MNEMO_ENDPOINT": served.url, "MNEMO_API_KEY": key, "MNEMO_DEADLINE": "1"}
    with Follower(tmp_path / "client", env=env) as follower:
        follower.wait_printed(before)
        served.stop()
        follower.wait_for(lambda: "dropped" in follower.stderr, "said the stream dropped")
        assert "reconnecting until it answers (^C to stop)" in follower.stderr
        # Down for twice the deadline, and still reconnecting: said on stderr, at doubling intervals.
        follower.wait_for(lambda: _down_for(follower.stderr) >= 2, "said it is still down past the deadline")
        assert follower.proc.poll() is None
        # Entries that land while the server is down (another process writing the store) are not lost.
        store = Store(isolated_home / "store.db")
        try:
            during = [store.write("alice", WriteRequest(f"during {i}", "ops")).atom_id for i in range(2)]
        finally:
            store.close()
        assert not set(during) & set(follower.seen)
        served = start_serve(isolated_home, port=port)  # the same port: the follow's URL
        try:
            follower.wait_printed(during)
            # Said before the entries, but read from another pipe: waited for, not assumed.
            follower.wait_for(lambda: "the follow reconnected to" in follower.stderr, "said it reconnected")
            after = [_write(served.url, key, "after")]
            follower.wait_printed(after)
            assert follower.seen == before + during + after  # each once, in the order written
            assert follower.proc.poll() is None
        finally:
            code, stderr = follower.stop()
            served.stop()
    assert code == 130 and "Traceback" not in stderr


def test_recent_follow_of_an_endpoint_without_the_push_channel_polls_through_an_outage(tmp_path: Path) -> None:
    import socket

    from mnemo_tui.server.app import create_app
    from tests.support.wire import ThreadServer

    path = tmp_path / "served.db"
    store = Store(path)
    _key_id, key = store.create_key("alice")
    apps: list[Any] = []

    def app_without_follow() -> Any:
        app = create_app(path, workers=2)
        apps.append(app)

        async def front(scope: dict[str, Any], receive: Any, send: Any) -> None:
            # The hosted service has no push follow: 404, so `recent -F` polls.
            if scope["type"] == "http" and scope["path"].endswith("/memory/follow"):
                await send({"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"0")]})
                await send({"type": "http.response.body", "body": b""})
                return
            await app(scope, receive, send)

        return front

    def serve(port: int = 0) -> ThreadServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        return ThreadServer(app_without_follow(), sock=sock).start()

    server = serve()
    try:
        before = [_write(server.url, key, "before")]
        env = {"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": key, "MNEMO_DEADLINE": "1"}
        with Follower(tmp_path / "client", env=env) as follower:
            follower.wait_printed(before)
            server.stop()
            follower.wait_for(lambda: "retrying until it answers" in follower.stderr, "said it cannot poll")
            assert follower.proc.poll() is None
            during = [store.write("alice", WriteRequest("during", "ops")).atom_id]
            server = serve(int(server.port))
            follower.wait_printed(during)
            follower.wait_for(lambda: "answers again; resuming where it stopped" in follower.stderr, "said it is back")
            after = [_write(server.url, key, "after")]
            follower.wait_printed(after)
            assert follower.seen == before + during + after
            code, stderr = follower.stop()
        assert code == 130 and "Traceback" not in stderr
    finally:
        server.stop()
        store.close()
        for app in apps:
            app.state.pool.close()
            app.state.health.close()
