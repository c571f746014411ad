"""Provides the push-follow benchmark (issue 38): over a real `mnemo serve` on loopback, the time from a write's
acknowledgement to its `entries` event on a follower's stream, against the write's own round trip in the same
run (the anchor); and the memory 1,000 idle followers add to the server, with the heartbeats they cost.

The follower reads the stream as `httpx` gives it (one line at a time); the writer waits for each event before
the next write, so every latency is one write's alone.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

MNEMO = shutil.which("mnemo", path=str(Path(sys.executable).parent)) or "mnemo"
_READY = re.compile(r"ready at (\S+)")
_ATOM = re.compile(r'"atom_id":"([^"]+)"')


def _serve(home: str, *args: str) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env["MNEMO_HOME"] = home
    proc = subprocess.Popen([MNEMO, "serve", "--port", "0", *args], env=env, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        found = _READY.search(line)
        if found:
            # The access log keeps coming: drained, so a full pipe never holds the server's log thread.
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, found.group(1)
    raise RuntimeError("mnemo serve did not start")


def _keys(home: str, count: int) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env["MNEMO_HOME"] = home
    made = [
        subprocess.run([MNEMO, "keys", "create", f"p{n}"], env=env, capture_output=True, text=True, check=True)
        for n in range(count)
    ]
    return [m.stdout.strip() for m in made]


async def _latency(url: str, key: str, writes: int) -> tuple[list[float], list[float]]:
    arrived: dict[str, float] = {}
    got = asyncio.Event()
    async with httpx.AsyncClient(timeout=httpx.Timeout(60, read=None)) as c:

        async def follow() -> None:
            async with c.stream("POST", url + "/memory/follow", json={}, headers={"X-Api-Key": key}) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data: "):
                        now = time.perf_counter()
                        for atom in _ATOM.findall(line):
                            arrived.setdefault(atom, now)
                        got.set()

        task = asyncio.create_task(follow())
        await asyncio.wait_for(got.wait(), 30)
        pushed, trips = [], []
        async with httpx.AsyncClient(timeout=60) as w:
            for n in range(writes):
                sent = time.perf_counter()
                answer = await w.post(url + "/memory/write", json={"content": f"x {n}"}, headers={"X-Api-Key": key})
                acked = time.perf_counter()
                atom = answer.json()["atom_id"]
                while atom not in arrived:
                    got.clear()
                    await asyncio.wait_for(got.wait(), 30)
                trips.append((acked - sent) * 1000)
                pushed.append(max(0.0, arrived[atom] - acked) * 1000)
        task.cancel()
    return pushed, trips


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _idle(url: str, keys: list[str], followers: int, pid: int, seconds: float) -> tuple[float, int]:
    limits = httpx.Limits(max_connections=followers + 10, max_keepalive_connections=followers + 10)
    started = asyncio.Semaphore(0)
    events = [0]
    async with httpx.AsyncClient(timeout=httpx.Timeout(60, read=None), limits=limits) as c:
        before = _rss_mb(pid)

        async def one(n: int) -> None:
            headers = {"X-Api-Key": keys[n % len(keys)]}
            async with c.stream("POST", url + "/memory/follow", json={}, headers=headers) as r:
                first = True
                async for line in r.aiter_lines():
                    if line.startswith("data: "):
                        events[0] += 1
                        if first:
                            first = False
                            started.release()

        tasks = [asyncio.create_task(one(n)) for n in range(followers)]
        for _ in range(followers):
            await asyncio.wait_for(started.acquire(), 120)
        counted = events[0]
        await asyncio.sleep(seconds)
        grown = _rss_mb(pid) - before
        beats = events[0] - counted
        for task in tasks:
            task.cancel()
    return grown, beats


def run(quick: bool = False) -> list[dict[str, Any]]:
    writes, followers, idle = (60, 200, 16.0) if quick else (300, 1000, 31.0)
    home = tempfile.mkdtemp(prefix="bench-follow-")
    keys = _keys(home, max(1, followers // 100))
    proc, url = _serve(home, "--max-follows", str(followers), "--max-connections", str(followers + 100))
    try:
        pushed, trips = asyncio.run(_latency(url, keys[0], writes))
        grown, beats = asyncio.run(_idle(url, keys, followers, proc.pid, idle))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(home, ignore_errors=True)
    pushed.sort()
    p50, p99 = statistics.median(pushed), pushed[min(len(pushed) - 1, int(len(pushed) * 0.99))]
    trip = statistics.median(trips)
    per = beats / followers / (idle / 15.0)
    return [
        {"name": "follow: write acknowledged → its event, p50", "value": round(p50, 2), "unit": "ms",
         "anchor": round(trip, 2), "anchor_is": "the write's round trip (median)", "ratio": round(p50 / trip, 2),
         "goal": "≤ 50"},
        {"name": "follow: write acknowledged → its event, p99", "value": round(p99, 2), "unit": "ms",
         "anchor": round(trip, 2), "anchor_is": "the write's round trip (median)", "ratio": round(p99 / trip, 2),
         "goal": "≤ 250"},
        {"name": f"follow: {followers} idle followers, server memory added", "value": round(grown, 1), "unit": "MB",
         "anchor": None, "ratio": None, "goal": "< 100"},
        {"name": "follow: heartbeats per idle follower per 15 s", "value": round(per, 2), "unit": "events",
         "anchor": None, "ratio": None, "goal": "≤ 1"},
    ]  # fmt: skip


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(row)
