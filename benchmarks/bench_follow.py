"""Provides the follow benchmark (issue 38): a write acknowledged -> its line printed by `mnemo recent --follow`.

Two `mnemo recent --follow --format ndjson` processes run at once over the same store: one against
mnemo serve's app (pushed), the anchor against the same app whose `/memory/follow` answers 404 as the
hosted service does (so the client polls once a second, as before issue 38). Both apps run under
uvicorn in threads of this process; a third `RemoteBackend` writes one entry at a time through the
pushing server, waiting for its pushed line before the next. Each line's latency is its arrival
minus the write's acknowledgement (floored at 0: the push may beat the answer to the writer).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
MNEMO = shutil.which("mnemo", path=str(BIN)) or "mnemo"


class _NoFollow:
    """The real app, but `/memory/follow` answers 404 (the hosted service has no push channel)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/memory/follow"):
            await send(
                {"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": b'{"detail":"Not Found"}'})
            return
        await self.app(scope, receive, send)


def _serve(app: Any) -> tuple[Any, str]:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_config=None, log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the benchmark's server did not start")
        time.sleep(0.01)
    return server, f"http://127.0.0.1:{sock.getsockname()[1]}/api/v1"


def _follower(home: Path, url: str, key: str, arrived: dict[str, float]) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update(MNEMO_HOME=str(home), MNEMO_ENDPOINT=url, MNEMO_API_KEY=key, NO_COLOR="1")
    proc = subprocess.Popen(
        [MNEMO, "recent", "--follow", "--format", "ndjson"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    stdout = proc.stdout
    assert stdout is not None

    def read() -> None:
        for line in stdout:
            arrived.setdefault(json.loads(line)["atom_id"], time.monotonic())

    threading.Thread(target=read, daemon=True).start()
    return proc


def _wait(condition: Any, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError("a follower did not print a write in time")
        time.sleep(0.0005)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(quick: bool) -> list[dict[str, Any]]:
    from mnemo_tui.backends.remote import RemoteBackend
    from mnemo_tui.engine.store import Store
    from mnemo_tui.server.app import create_app
    from mnemo_tui.values.writes import WriteRequest

    writes = 60 if quick else 300
    home = Path(tempfile.mkdtemp(prefix="mnemo-bench-follow-"))
    store = Store(home / "store.db")
    key = store.create_key("local")[1]
    store.close()
    pushing_app, polled_app = create_app(home / "store.db", workers=2), create_app(home / "store.db", workers=2)
    servers = []
    pushed: dict[str, float] = {}
    polled: dict[str, float] = {}
    followers = []
    try:
        server, url = _serve(pushing_app)
        servers.append(server)
        server, polled_url = _serve(_NoFollow(polled_app))
        servers.append(server)
        followers = [_follower(home, url, key, pushed), _follower(home, polled_url, key, polled)]
        writer = RemoteBackend(url, key)
        try:
            warm = writer.write(WriteRequest("warm up", "general")).atom_id
            _wait(lambda: warm in pushed and warm in polled)
            acked: dict[str, float] = {}
            for i in range(writes):
                atom = writer.write(WriteRequest(f"follow latency {i}", "general")).atom_id
                acked[atom] = time.monotonic()
                _wait(lambda atom=atom: atom in pushed)  # type: ignore[misc]
                time.sleep(0.01)
            _wait(lambda: all(a in polled for a in acked))
        finally:
            writer.close()
    finally:
        for proc in followers:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
        for server in servers:
            server.should_exit = True
        for app in (pushing_app, polled_app):
            app.state.pool.close()
            app.state.health.close()
        shutil.rmtree(home, ignore_errors=True)
    push_ms = [max(0.0, pushed[a] - t) * 1000 for a, t in acked.items()]
    poll_ms = [max(0.0, polled[a] - t) * 1000 for a, t in acked.items()]
    rows = []
    for name, q, goal in (("p50", 0.5, "≤ 50"), ("p99", 0.99, "≤ 250")):
        value, anchor = _percentile(push_ms, q), _percentile(poll_ms, q)
        rows.append(
            {
                "name": f"follow latency {name}, write acknowledged -> line printed ({writes} writes)",
                "value": round(value, 1),
                "unit": "ms",
                "anchor": round(anchor, 1),
                "anchor_is": "the same follower polling (an endpoint without the channel)",
                "ratio": round(value / anchor, 3) if anchor else None,
                "goal": goal,
            }
        )
    print(
        f"push p50 {statistics.median(push_ms):.1f} ms, poll p50 {statistics.median(poll_ms):.1f} ms", file=sys.stderr
    )
    return rows


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(json.dumps(row, ensure_ascii=False))
