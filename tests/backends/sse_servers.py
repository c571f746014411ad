"""A tiny asyncio HTTP/1.1 server in a thread whose answers a test writes byte by byte (push-follow faults)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from mnemo_tui import timefmt

SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ncache-control: no-store\r\n\r\n"

Handler = Callable[[int, asyncio.StreamWriter], Awaitable[None]]


class RawServer:
    """Each connection's one request is read and recorded (request line, headers, body), then
    `handler(n, writer)` writes its answer (n counts connections from 0); the connection closes after."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        start = asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.server = asyncio.run_coroutine_threadsafe(start, self.loop).result(10)
        self.port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/api/v1"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:] if line)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            n = len(self.requests)
            self.requests.append((head[0], headers, body))
            await self.handler(n, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def close(self) -> None:
        async def shut() -> None:
            self.server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shut(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


def event(kind: str, position: str | None, data: Any) -> bytes:
    """One server-sent event as docs/server.md spells it."""
    head = f"event: {kind}\n" + (f"id: {position}\n" if position is not None else "")
    return (head + "data: " + json.dumps(data, separators=(",", ":")) + "\n\n").encode()


def item(n: int, base: int = 1_780_000_000_000_000) -> dict[str, Any]:
    """A wire item (RecentItem) numbered n, one second apart, the higher the newer."""
    return {
        "atom_id": f"00000000-0000-4000-8000-{n:012d}",
        "content": f"pushed {n}",
        "domain": "general",
        "created_at": timefmt.to_iso(base + n * 1_000_000),
        "concepts": [],
    }


async def hang() -> None:
    """Write nothing more, ever (until the server closes)."""
    await asyncio.Event().wait()
