"""Provides the HTTP-edge measurement of issue 32: `/health` latency and the server's memory while 500 half-open
connections and 4 header-streaming clients are held against a real `mnemo serve` on loopback.

    python benchmarks/bench_edges.py [--held 500] [--streams 4] [--seconds 15] [--probes 40]

The attackers hold their number of connections for `--seconds`: a half-open one sends half a request's
headers and nothing more, a streaming one sends an endless header value 16 KiB a turn (about every 10 ms); whichever the
server closes (408, 431, 503 or a close) is opened again at once. `/health` is asked `--probes` times
before and during the hold, one new connection each; the figures are medians and maxima, with the
server's resident memory and open descriptors sampled during the hold. Loopback only, bounded loops.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

MNEMO = str(Path(sys.executable).with_name("mnemo"))
READY = re.compile(r"ready at http://127\.0\.0\.1:(\d+)/api/v1")
HALF = b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\nX-Half: "
STREAM_HEAD = b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\nX-Stream: "
CHUNK = b"a" * 16384  # a streaming client sends this much of its header value each turn (~10 ms)


def start(home: Path, *args: str) -> tuple[subprocess.Popen[str], int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")} | {"MNEMO_HOME": str(home)}
    proc = subprocess.Popen(
        [MNEMO, "serve", "--port", "0", *args], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if found := READY.search(line):
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep the pipe drained
            port = int(found.group(1))
            for _ in range(600):  # until it answers
                try:
                    probe(port)
                    return proc, port
                except OSError:
                    time.sleep(0.05)
            break
    proc.kill()
    raise SystemExit("mnemo serve did not start")


def probe(port: int) -> float:
    """Seconds for one `/health` on a new connection."""
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    if not answer.startswith(b"HTTP/1.1 200 "):
        raise OSError(f"health answered {answer[:40]!r}")
    return time.perf_counter() - started


def probes(port: int, count: int) -> dict[str, float]:
    times = []
    failed = 0
    for _ in range(count):
        try:
            times.append(probe(port))
        except OSError:
            failed += 1
    if not times:
        return {"failed": failed}
    return {
        "median_ms": round(statistics.median(times) * 1000, 2),
        "max_ms": round(max(times) * 1000, 2),
        "failed": failed,
    }


class Attack:
    """`held` half-open connections and `streams` header-streaming ones, reopened as the server closes them."""

    def __init__(self, port: int, held: int, streams: int) -> None:
        self.port, self.held, self.streams = port, held, streams
        self.selector = selectors.DefaultSelector()
        self.stop = threading.Event()
        self.reopened = 0
        self.answers: dict[str, int] = {}
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _open(self, streaming: bool) -> None:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        sock.sendall(STREAM_HEAD if streaming else HALF)
        sock.setblocking(False)
        self.selector.register(sock, selectors.EVENT_READ, streaming)

    def _run(self) -> None:
        for i in range(self.held + self.streams):
            self._open(i >= self.held)
        while not self.stop.is_set():
            for key, _ in self.selector.select(timeout=0.01):
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                status = data[9:12].decode(errors="replace") if data.startswith(b"HTTP/1.1 ") else "close"
                self.answers[status] = self.answers.get(status, 0) + 1
                self.selector.unregister(sock)
                sock.close()
                self.reopened += 1
                self._open(key.data)
            for key in list(self.selector.get_map().values()):
                if key.data:  # a streaming client: more of the same header value
                    try:
                        key.fileobj.send(CHUNK)  # type: ignore[union-attr]
                    except OSError:
                        pass
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]

    def __enter__(self) -> Attack:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=60)


def resident(pid: int) -> dict[str, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1))  # type: ignore[union-attr]
    return {"rss_kib": rss, "fds": len(os.listdir(f"/proc/{pid}/fd"))}


def measure(held: int, streams: int, seconds: float, count: int, serve_args: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mnemo-edges-") as tmp:
        proc, port = start(Path(tmp), *serve_args)
        try:
            alone = probes(port, count)
            idle = resident(proc.pid)
            with Attack(port, held, streams) as attack:
                deadline = time.monotonic() + seconds
                during: list[dict[str, float]] = []
                peak = idle
                while time.monotonic() < deadline:  # bounded: `seconds` of probing
                    during.append(probes(port, max(1, count // 4)))
                    now = resident(proc.pid)
                    peak = {k: max(peak[k], now[k]) for k in peak}
            after = probes(port, count)
            return {
                "held": held,
                "streams": streams,
                "seconds": seconds,
                "serve_args": serve_args,
                "health_alone": alone,
                "health_during": {
                    "median_ms": statistics.median(d["median_ms"] for d in during if "median_ms" in d),
                    "max_ms": max(d.get("max_ms", 0.0) for d in during),
                    "failed": sum(d["failed"] for d in during),
                    "probes": sum(max(1, count // 4) for _ in during),
                },
                "health_after": after,
                "server_idle": idle,
                "server_peak_during": peak,
                "attack_answers": attack.answers,
                "attack_reopened": attack.reopened,
                "loadavg": os.getloadavg(),
            }
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held", type=int, default=500)
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--probes", type=int, default=40)
    parser.add_argument("serve_args", nargs="*", help="options passed to mnemo serve (after --)")
    args = parser.parse_args(argv)
    result = measure(args.held, args.streams, args.seconds, args.probes, args.serve_args)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
