"""Provides the server's share of the streamed walk: `mnemo serve`'s CPU and peak memory for one `recent --all`
stream of the 200,000-entry store, read by the simplest client (`http.client`, the lines counted, nothing parsed).

    python benchmarks/bench_walk_server.py [--quick] [--reps N] [--entries N] [--against TREE]

`mnemo serve` runs pinned to one core (`taskset`), this client to the other. The server's CPU is every thread's
(Linux's per-thread schedstat) over each stream, so it means what it says while other processes share the machine
(a wall time would not); its peak memory is `VmHWM`, beside its resident memory once started and warmed by one
page (the bare app's share). The anchor is the embedded walk's own read in this process (`Store.stream_wire`, the
wire column only, what `mnemo recent --all` reads): CPU seconds as well. `--against TREE` runs a second server
from another source tree of mnemo (`git worktree add TREE COMMIT`: the code before a change) on the same core and
store, the streams alternated between the two, so that what else runs on the machine weighs on both alike.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _servers  # noqa: E402
from bench_engine import PRINCIPAL, build_store  # noqa: E402

from mnemo_tui.engine.sqlite.store import Store  # noqa: E402
from mnemo_tui.values.model import RecentQuery  # noqa: E402

LIMIT = 100
CLIENT_CORE, SERVER_CORE = 0, 1


def _memory_mb(pid: int, field: str) -> float:
    found = re.search(rf"{field}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(found.group(1)) / 1024 if found else 0.0


def _user_system(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of every thread of a process so far (`/proc/PID/stat`, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def stream_once(url: str, key: str) -> tuple[int, int]:
    """One streamed walk of the whole feed: the lines (pages) and the bytes read."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    try:
        body = json.dumps({"limit": LIMIT})
        headers = {"X-Api-Key": key, "Accept": "application/x-ndjson", "Content-Type": "application/json"}
        conn.request("POST", parts.path + "/memory/recent", body, headers)
        answer = conn.getresponse()
        if answer.status != 200 or not answer.getheader("content-type", "").startswith("application/x-ndjson"):
            raise RuntimeError(f"the stream was refused: {answer.status} {answer.read()[:200]!r}")
        lines = size = 0
        last = b""
        while chunk := answer.read1(1 << 20):
            lines += chunk.count(b"\n")
            size += len(chunk)
            last = (last + chunk)[-200:]
        if not last.endswith(b'"next_cursor":null}\n'):
            raise RuntimeError("the stream ended before its last page")
        return lines, size
    finally:
        conn.close()


def embedded_cpu(store: Path) -> float:
    """CPU seconds of the embedded walk's read of the same store in this process (`Store.stream_wire`)."""
    engine = Store(store)
    try:
        started = time.process_time()
        count = sum(len(chunk) for chunk in engine.stream_wire(PRINCIPAL, RecentQuery(limit=LIMIT)))
        spent = time.process_time() - started
    finally:
        engine.close()
    if count == 0:
        raise RuntimeError("the embedded read found nothing")
    return spent


class Served:
    """One `mnemo serve` under measure: its process, address, and each stream's CPU (every thread)."""

    def __init__(self, name: str, store: Path, home: Path, tree: str | None) -> None:
        self.name = name
        prefix = ["taskset", "-c", str(SERVER_CORE)] if shutil.which("taskset") else []
        if tree is not None:  # another source tree's mnemo (before a change), ahead of the installed one
            prefix = ["env", f"PYTHONPATH={tree}", *prefix]
        home.mkdir()
        self.proc, self.url = _servers.start_serve(store, home, prefix)
        self.cpu: list[float] = []
        self.user = self.system = 0.0
        self.started_mb = self.peak_mb = 0.0

    def warm(self, key: str) -> None:
        """One page answered: the app as it idles, its memory the bare figure."""
        parts = urlsplit(self.url)
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
        conn.request("POST", parts.path + "/memory/recent", json.dumps({"limit": 1}), {"X-Api-Key": key})
        conn.getresponse().read()
        conn.close()
        self.started_mb = _memory_mb(self.proc.pid, "VmRSS")

    def stream(self, key: str, n: int) -> int:
        """One streamed walk, its CPU counted; returns its bytes."""
        before = _servers.cpu_ns(self.proc.pid)
        user, system = _user_system(self.proc.pid)
        lines, size = stream_once(self.url, key)
        # The last bytes were sent before the client read them: the server's work for it is done.
        self.cpu.append((_servers.cpu_ns(self.proc.pid) - before) / 1e9)
        after = _user_system(self.proc.pid)
        self.user += after[0] - user
        self.system += after[1] - system
        if lines != -(-n // LIMIT):
            raise AssertionError(f"{lines} lines for {n} entries from {self.name}")
        return size

    def stop(self) -> None:
        self.peak_mb = _memory_mb(self.proc.pid, "VmHWM")
        self.proc.terminate()
        self.proc.wait(timeout=30)


def measure(n: int, reps: int, against: str | None = None) -> dict[str, Any]:
    """Server CPU of each of `reps` streams of an `n`-entry store, its memory, and the embedded read's CPU; with
    `against` (another source tree), that tree's server too, the streams alternated between the two."""
    store = build_store(n)
    admin = Store(store)
    key = admin.create_key(PRINCIPAL)[1]
    admin.close()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {CLIENT_CORE})
    servers: list[Served] = []
    size = 0
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-walk-server-") as tmp:
        try:
            servers.append(Served("this tree", store, Path(tmp) / "this", None))
            if against is not None:
                servers.append(Served(against, store, Path(tmp) / "against", against))
            for served in servers:
                served.warm(key)
            for rep in range(reps):
                for served in servers[rep % len(servers) :] + servers[: rep % len(servers)]:
                    size = served.stream(key, n)
        finally:
            for served in servers:
                served.stop()
    anchor = min(embedded_cpu(store) for _ in range(3))
    return {"n": n, "servers": servers, "bytes": size, "anchor": anchor}


def run(
    quick: bool = False, reps: int | None = None, n: int | None = None, against: str | None = None
) -> list[dict[str, Any]]:
    got = measure(n or (20_000 if quick else 200_000), reps or (3 if quick else 7), against)
    rows = []
    for served in got["servers"]:
        server = statistics.median(served.cpu)
        count = len(served.cpu)
        rows += [
            {
                "name": f"`mnemo serve`'s CPU for one streamed walk of {got['n']:,} entries ({served.name}; every "
                f"thread, median of {count}: {', '.join(f'{c:.3f}' for c in served.cpu)}; user "
                f"{served.user / count:.2f} s, system {served.system / count:.2f} s a stream)",
                "value": round(server, 3),
                "unit": "s",
                "anchor": round(got["anchor"], 3),
                "ratio": round(server / got["anchor"], 2),
                "goal": "≤ ~0.3 s at 200,000",
                "anchor_is": "the embedded walk's read of the same store (`Store.stream_wire`), CPU, best of 3",
            },
            {
                "name": f"`mnemo serve`'s peak memory over those streams ({served.name}; "
                f"{got['bytes'] / 1e6:.1f} MB each)",
                "value": round(served.peak_mb, 1),
                "unit": "MB",
                "anchor": round(served.started_mb, 1),
                "ratio": round(served.peak_mb / served.started_mb, 2),
                "goal": "< 100 MB",
                "anchor_is": "its resident memory once started and one page answered",
            },
        ]
    return rows


if __name__ == "__main__":
    args = sys.argv[1:]
    reps = int(args[args.index("--reps") + 1]) if "--reps" in args else None
    entries = int(args[args.index("--entries") + 1]) if "--entries" in args else None
    against = args[args.index("--against") + 1] if "--against" in args else None
    for row in run("--quick" in args, reps, entries, against):
        print(row)
