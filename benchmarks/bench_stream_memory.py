"""Provides the memory benchmark of stalled streams (issue 50): `mnemo serve`'s resident memory with 16 streamed
walks of one key whose clients stopped reading, then with 50 push follows whose clients stopped reading fed fat
events, each against the server's idle figure in the same run (after a warm-up of the same requests read whole).

The goals (docs/server.md, "The streamed walk" and "Push follow"): 16 stalled walks at most about 32 MiB (at most
48) beyond idle; 50 stalled follows at most idle + 50 x two events' bound (`follow.EVENT_BYTES`). Entries are
40 KB (10,000 four-byte characters, content at its bound), so a page of 100 is 4 MiB.

    .venv/bin/python benchmarks/bench_stream_memory.py
"""

from __future__ import annotations

import json
import re
import socket
import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_remote import start_serve  # noqa: E402

from mnemo_tui.engine.sqlite.store import Store  # noqa: E402
from mnemo_tui.server import follow  # noqa: E402
from mnemo_tui.values.writes import WriteRequest  # noqa: E402

FAT = "\N{GRINNING FACE}" * 10_000
ENTRIES = 2_000  # 80 MB of entries: far more than any stalled stream may hold
WALKS = 16
FOLLOWS = 50
SETTLE = 20.0  # seconds the stalled figure is sampled for (below the 30 s send deadline that ends them)


def _rss_mb(pid: int) -> float:
    found = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(found.group(1)) / 1024 if found else 0.0


def _stalled(url: str, path: str, key: str, body: dict[str, object], accept: str) -> socket.socket:
    """A connection that sends its request and never reads (a small receive buffer, as a stuck client)."""
    host, port = re.match(r"http://([^:/]+):(\d+)", url).groups()  # type: ignore[union-attr]
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    raw = json.dumps(body).encode()
    prefix = url.split(port, 1)[1]
    sock.sendall(
        f"POST {prefix}{path} HTTP/1.1\r\nHost: {host}\r\nX-Api-Key: {key}\r\nAccept: {accept}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(raw)}\r\n\r\n".encode()
        + raw
    )
    return sock


def _peak(pid: int, seconds: float) -> float:
    """The highest resident memory sampled over `seconds` (the streams fill their buffers meanwhile)."""
    peak, end = 0.0, time.monotonic() + seconds
    while time.monotonic() < end:
        peak = max(peak, _rss_mb(pid))
        time.sleep(0.25)
    return peak


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-streams-") as tmp:
        home = Path(tmp)
        path = home / "store.db"
        store = Store(path)
        key = store.create_key("alice")[1]
        store.bulk_insert([("alice", WriteRequest(content=FAT, domain="n"), 1_000_000 + i) for i in range(ENTRIES)])
        serve, url = start_serve(path, home)
        try:
            with httpx.Client(timeout=120) as http:  # the warm-up: the same requests, read whole
                for _ in range(2):
                    walk = http.post(
                        url + "/memory/recent",
                        json={"limit": 100},
                        headers={"X-Api-Key": key, "Accept": "application/x-ndjson"},
                    )
                    assert walk.status_code == 200 and walk.content.count(b"\n") > ENTRIES // 100
            idle = _rss_mb(serve.pid)
            walks = [_stalled(url, "/memory/recent", key, {"limit": 100}, "application/x-ndjson") for _ in range(WALKS)]
            walked = _peak(serve.pid, SETTLE)
            for sock in walks:
                sock.close()
            time.sleep(2)
            idle_follow = _rss_mb(serve.pid)
            follows = [
                _stalled(url, "/memory/follow", key, {"limit": 100}, "text/event-stream") for _ in range(FOLLOWS)
            ]
            # Each follow starts with the newest page: 100 entries, 4 MiB of fat events it never reads.
            followed = _peak(serve.pid, SETTLE)
            for sock in follows:
                sock.close()
        finally:
            store.close()
            serve.terminate()
            serve.wait(timeout=30)
    bound = 2 * follow.EVENT_BYTES / 2**20
    print(f"idle {idle:.0f} MiB; {WALKS} stalled walks: +{walked - idle:.0f} MiB (goal about 32, at most 48)")
    print(
        f"idle {idle_follow:.0f} MiB; {FOLLOWS} stalled follows: +{followed - idle_follow:.0f} MiB "
        f"(goal at most {FOLLOWS} x {bound:.0f} = {FOLLOWS * bound:.0f})"
    )


if __name__ == "__main__":
    main()
