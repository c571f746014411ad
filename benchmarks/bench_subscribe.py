"""Provides the feed subscriptions' benchmark (issue 61): notification latency across servers, and the cost of
1,000 idle subscriptions.

    python benchmarks/bench_subscribe.py [--quick]

(a) Across servers on PostgreSQL (a cluster of its own, as the tests start one; skipped without the binaries):
    two `mnemo serve --database-pooler none` over one database; the official `mcp` client holds a 2025-11-25
    session on B subscribed to `memory://feed/bench`, and one on A (the anchor: the same server, woken at
    once by its own write). Writes through A's REST `POST /memory/write`, one at a time, 20-60 ms apart; a
    write's latency is from its HTTP answer arriving here to its notification arriving here, on each session.
(b) 1,000 idle subscriptions across 12 keys (84 a key, within the bound of 100) on one embedded-store server:
    12 sessions, each subscribed to 84 feeds; the server's VmRSS before and with them, the access lines its
    log holds over an idle window (requests the subscribers made), and its CPU over the window.

Figures are printed (rows as `run.py` prints them), never asserted.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_follow import PRINCIPAL, Server, _pct, _row, make_store, serve  # noqa: E402

warnings.filterwarnings("ignore", message=".*resources/(un)?subscribe is removed.*")
KEYS = 12
PER_KEY = 84  # 12 keys carry 1,008 (the per-key bound is 100)
URI = "memory://feed/bench"


class Heard:
    """The arrival times of one session's `notifications/resources/updated`, woken as they come."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.changed = asyncio.Event()

    async def __call__(self, message: Any) -> None:
        import mcp_types as types

        if isinstance(message, types.ResourceUpdatedNotification):
            self.times.append(time.perf_counter())
            self.changed.set()

    async def count(self, n: int, seconds: float = 60.0) -> None:
        async with asyncio.timeout(seconds):
            while len(self.times) < n:
                self.changed.clear()
                await self.changed.wait()


def _client(url: str, key: str, heard: Heard | None = None) -> Any:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = create_mcp_http_client(headers={"authorization": f"Bearer {key}"})
    return Client(streamable_http_client(url, http_client=http), mode="legacy", message_handler=heard)


def _mcp(srv: Server) -> str:
    return srv.url.removesuffix("/api/v1") + "/mcp"


async def _latency(a: Server, b: Server, key: str, writes: int) -> dict[str, list[float]]:
    import httpx

    heard = {"same server": Heard(), "another server": Heard()}
    rng = random.Random(61)
    async with (
        _client(_mcp(a), key, heard["same server"]) as on_a,
        _client(_mcp(b), key, heard["another server"]) as on_b,
        httpx.AsyncClient(base_url=a.url, headers={"X-Api-Key": key}) as rest,
    ):
        for client in (on_a, on_b):
            await client.subscribe_resource(URI)
        acked: list[float] = []
        for i in range(writes):
            answer = await rest.post("/memory/write", json={"content": f"subscribe bench {i}", "domain": "bench"})
            acked.append(time.perf_counter())
            answer.raise_for_status()
            for h in heard.values():
                await h.count(i + 1)
            await asyncio.sleep(rng.uniform(0.02, 0.06))
    return {name: [(t - w) * 1000 for w, t in zip(acked, h.times, strict=True)] for name, h in heard.items()}


def postgres(root: Path, writes: int) -> dict[str, list[float]] | None:
    sys.path.insert(0, str(HERE.parent / "tests"))
    from mnemo_tui.engine.postgres.store import PgStore
    from tests.support import pg

    if pg.binaries() is None:
        return None
    cluster = pg.start_cluster()
    databases = pg.Databases(cluster)
    servers: list[Server] = []
    try:
        url = cluster.url(databases.create())
        admin = PgStore(url)
        key = admin.create_key(PRINCIPAL)[1]
        admin.close()
        for name in ("a", "b"):
            args = ("--database", url, "--database-pooler", "none", "--workers", "4")
            servers.append(serve(None, root / f"pg-{name}", *args))
        return asyncio.run(_latency(servers[0], servers[1], key, writes))
    finally:
        for srv in servers:
            srv.stop()
        databases.close()
        pg.stop_cluster(cluster)


async def _idle(srv: Server, keys: list[str], window: float) -> dict[str, Any]:
    from contextlib import AsyncExitStack

    before = srv.rss_kib()
    async with AsyncExitStack() as stack:
        for key in keys:
            client = await stack.enter_async_context(_client(_mcp(srv), key))
            for n in range(PER_KEY):
                await client.subscribe_resource(f"memory://feed/idle-{n}")
        await asyncio.sleep(1.0)  # the subscriptions' last answers logged
        opened = srv.rss_kib()
        start, cpu = time.time(), srv.cpu_seconds()
        await asyncio.sleep(window)
        end = time.time()
        cpu = srv.cpu_seconds() - cpu
        await asyncio.sleep(0.5)  # the access log is written in batches
        requests = srv.requests_between(start, end)
    return {"before": before, "with": opened, "requests": requests, "cpu": cpu, "window": window}


def run(quick: bool = False) -> list[dict[str, Any]]:
    writes = 30 if quick else 200
    window = 5.0 if quick else 30.0
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-subscribe-") as tmp:
        root = Path(tmp)
        across = postgres(root, writes)
        if across is not None:
            same, other = across["same server"], across["another server"]
            for q, label, goal in ((0.5, "p50", "≤ 50 ms"), (0.99, "p99", "≤ 250 ms")):
                rows.append(
                    _row(
                        f"feed notification on another server over PostgreSQL (LISTEN), {label}",
                        _pct(other, q),
                        "ms",
                        _pct(same, q),
                        goal,
                        f"{label} of the same write's notification on the writing server itself",
                    )
                )
        store = root / "idle.db"
        keys = make_store(store, KEYS)
        srv = serve(store, root / "idle", "--max-connections", "2000")
        try:
            idle = asyncio.run(_idle(srv, keys, window))
        finally:
            srv.stop()
        count = KEYS * PER_KEY
        rows.append(
            _row(
                f"{count:,} idle feed subscriptions ({KEYS} keys): server VmRSS with them",
                idle["with"] / 1024,
                "MiB",
                idle["before"] / 1024,
                "a few MiB more",
                "the server's VmRSS before the sessions opened",
            )
        )
        rows.append(
            _row(
                f"{count:,} idle feed subscriptions: requests over {idle['window']:.0f} s idle",
                idle["requests"],
                "requests",
                None,
                "0",
                "none",
            )
        )
        rows.append(
            _row(
                f"{count:,} idle feed subscriptions: server CPU over {idle['window']:.0f} s idle",
                idle["cpu"],
                "s",
                idle["window"],
                "≈ 0",
                "the window",
            )
        )
    return rows


if __name__ == "__main__":
    from run import machine, markdown

    started = " ".join(f"{x:.2f}" for x in os.getloadavg())
    got = run("--quick" in sys.argv)
    info = machine()
    info["load at start"] = started
    sys.stdout.write(markdown(got, [], info))
