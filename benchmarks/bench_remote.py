"""Provides the remote benchmark: `mnemo recent --all` over `mnemo serve` against the same walk on the embedded store,
and the walk page by page against a bare app that does the contract's work, read by the same client.

Whole processes for the streamed walk: `mnemo recent --all --format ndjson` on the embedded store and against
`mnemo serve` on the same 200,000-entry store, alternated, each client pinned to one core (`taskset`), the
server to the other, with each side's CPU and memory. Page by page (a `Walk` with a page budget, as `catchup`
reads an endpoint without the stream): `RemoteBackend` reads `mnemo serve` and a bare ASGI app under uvicorn
that does what the contract makes a server do for a page (a key's hash looked up, the request body checked,
an HMAC-signed cursor checked and signed, the engine's keyset SQL run, the stored texts joined), a page of
each in turn, so load from other processes hits both.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _servers  # noqa: E402
from bench_cli import _compiled, run_child, run_child_cpu  # noqa: E402
from bench_engine import PRINCIPAL, build_store  # noqa: E402

from mnemo_tui.backends.remote import RemoteBackend  # noqa: E402
from mnemo_tui.catchup.walk import Walk  # noqa: E402
from mnemo_tui.engine.sqlite.store import Store  # noqa: E402
from mnemo_tui.values.model import Entry, RecentQuery  # noqa: E402

MNEMO = shutil.which("mnemo", path=str(Path(sys.executable).parent)) or "mnemo"
TASKSET = shutil.which("taskset")
LIMIT = 100
WALKERS = 8
# The cores the client and the server are pinned to (the machine has at least two).
CLIENT_CORE, SERVER_CORE = 0, 1

# The anchor of a page: what the contract makes a server do for one, and nothing else (no framework, one
# connection, no thread hop, no access line).
_BARE = r"""
import hashlib, hmac, json, os, sqlite3, struct, sys
import uvicorn

db = sqlite3.connect(sys.argv[1], check_same_thread=False)
SECRET = os.urandom(32)
CURSOR = struct.Struct(">B8sq36s")
KEY = ("SELECT principal, revoked_at, key_hash FROM api_keys WHERE key_hash = ?")
BUCKET = "SELECT bucket FROM buckets WHERE kind = 'own' AND owner = ?"
TOP = ("SELECT a.created_at, a.atom_id, a.wire FROM atoms a WHERE a.bucket = ? AND a.superseded_by IS NULL "
       "ORDER BY a.created_at DESC, a.atom_id DESC LIMIT ?")
AFTER = ("SELECT a.created_at, a.atom_id, a.wire FROM atoms a WHERE a.bucket = ? AND a.superseded_by IS NULL "
         "AND (a.created_at, a.atom_id) < (?, ?) ORDER BY a.created_at DESC, a.atom_id DESC LIMIT ?")

def refuse(status, code):
    return status, json.dumps({"code": code, "message": code, "requestId": None, "retryable": False, "details": None}).encode()

def page(headers, raw):
    key = headers.get(b"x-api-key", b"").decode()
    wanted = hashlib.sha256(key.encode()).hexdigest()
    row = db.execute(KEY, (wanted,)).fetchone()
    if row is None or row[1] is not None or not hmac.compare_digest(row[2], wanted):
        return refuse(401, "UNAUTHORIZED")
    body = json.loads(raw) if raw else {}
    limit, cursor = body.get("limit", 20), body.get("cursor")
    if type(limit) is not int or not 1 <= limit <= 100 or not (cursor is None or type(cursor) is str):
        return refuse(400, "VALIDATION_ERROR")
    bound = hashlib.sha256(row[0].encode()).digest()[:8]
    bucket = db.execute(BUCKET, (row[0],)).fetchone()[0]
    if cursor:
        try:
            packed = bytes.fromhex(cursor)
            if len(packed) != CURSOR.size + 16 or not hmac.compare_digest(packed[CURSOR.size:], hmac.digest(SECRET, packed[:CURSOR.size], "sha256")[:16]):
                raise ValueError
            _, their, at, atom = CURSOR.unpack(packed[:CURSOR.size])
            if not hmac.compare_digest(their, bound):
                raise ValueError
        except ValueError:
            return refuse(400, "VALIDATION_ERROR")
        rows = db.execute(AFTER, (bucket, at, atom.decode(), limit + 1)).fetchall()
    else:
        rows = db.execute(TOP, (bucket, limit + 1)).fetchall()
    nxt = b"null"
    if len(rows) > limit:
        del rows[limit:]
        packed = CURSOR.pack(2, bound, rows[-1][0], rows[-1][1].encode())
        nxt = b'"' + (packed + hmac.digest(SECRET, packed, "sha256")[:16]).hex().encode() + b'"'
    return 200, b'{"items":[' + ",".join(r[2] for r in rows).encode() + b'],"next_cursor":' + nxt + b"}"

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    raw = b""
    while True:
        message = await receive()
        raw += message.get("body", b"")
        if not message.get("more_body"):
            break
    headers = dict(scope["headers"])
    status, out = page(headers, raw)
    if status != 200 or b"application/x-ndjson" not in headers.get(b"accept", b""):
        kind = [(b"content-type", b"application/json"), (b"x-mnemo-wire", b"canonical")]
        await send({"type": "http.response.start", "status": status, "headers": kind})
        await send({"type": "http.response.body", "body": out})
        return
    # The streamed walk as mnemo serve answers it: a page a line, each read as a request for it would be (its
    # cursor checked, the next one signed), up to 16 lines a part, each part sent before the next is read.
    kind = [(b"content-type", b"application/x-ndjson"), (b"x-mnemo-wire", b"canonical")]
    await send({"type": "http.response.start", "status": 200, "headers": kind})
    body = json.loads(raw) if raw else {}
    while True:
        part = [out]
        while len(part) < 16 and not out.endswith(b":null}"):
            cursor = json.loads(out[out.rindex(b',"next_cursor":') + 15 : -1])
            out = page(headers, json.dumps({**body, "cursor": cursor}).encode())[1]
            part.append(out)
        await send({"type": "http.response.body", "body": b"\n".join(part) + b"\n", "more_body": True})
        if out.endswith(b":null}"):
            break
        cursor = json.loads(out[out.rindex(b',"next_cursor":') + 15 : -1])
        out = page(headers, json.dumps({**body, "cursor": cursor}).encode())[1]
    await send({"type": "http.response.body", "body": b""})

uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning", access_log=False, http="h11")
"""


def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    import httpx

    for _ in range(400):
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            httpx.post(url + "/memory/recent", json={"limit": 1}, timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise RuntimeError("server did not start")


def _pinned(core: int) -> list[str]:
    """The prefix that runs a command on one core (nothing where `taskset` is missing: then nothing is pinned)."""
    return [TASKSET, "-c", str(core)] if TASKSET else []


def start_serve(store: Path, home: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`mnemo serve` on a free loopback port, as a user starts it (its log to a file), pinned to the server's core."""
    return _servers.start_serve(store, home, _pinned(SERVER_CORE))


def start_bare(store: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The contract-doing bare app under uvicorn on a free loopback port, pinned to the server's core."""
    port = _servers.free_port()
    proc = subprocess.Popen(
        [*_pinned(SERVER_CORE), sys.executable, "-c", _BARE, str(store), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/api/v1"
    _wait_ready(url, proc)
    return proc, url


def _peak_mb(pid: int) -> float:
    """The peak resident memory of a running process (`VmHWM`), in MB."""
    found = re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(found.group(1)) / 1024 if found else 0.0


def _env(home: Path, **more: str) -> dict[str, str]:
    # PYTHONDONTWRITEBYTECODE is dropped: an installed mnemo has its byte code (see `bench_cli._compiled`).
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_") and k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "MNEMO_HOME": str(home), "NO_COLOR": "1", **more}


def _printed(command: list[str], env: dict[str, str]) -> tuple[str, int]:
    """The digest of what a command prints, and its line count."""
    out = subprocess.run(command, env=env, capture_output=True, check=True).stdout
    return hashlib.sha256(out).hexdigest(), out.count(b"\n")


def streamed_all(
    store: Path, serve: tuple[str, int], bare: tuple[str, int], key: str, home: Path, n: int, reps: int
) -> dict[str, list[float]]:
    """`mnemo recent --all --format ndjson` on the embedded store, against `mnemo serve` and against the bare app's
    stream (the same store), whole processes in turn (each round started one further on), the client on its core.

    Returns per side (`embedded`, `remote`, `bare`) the walls, the client's CPU (`NAME cpu`) and max RSS (`NAME
    rss`, MB), and for the two remote ones their server's CPU, every thread (`NAME server`).
    """
    command = [*_pinned(CLIENT_CORE), MNEMO, "recent", "--all", "--format", "ndjson"]
    envs = {
        "embedded": _env(home / "embedded", MNEMO_STORE=str(store), MNEMO_PRINCIPAL=PRINCIPAL),
        "remote": _env(home / "remote", MNEMO_ENDPOINT=serve[0], MNEMO_API_KEY=key),
        "bare": _env(home / "remote", MNEMO_ENDPOINT=bare[0], MNEMO_API_KEY=key),
    }
    servers = {"embedded": None, "remote": serve[1], "bare": bare[1]}
    # The contract first: each prints the same n lines, byte for byte.
    printed = {side: _printed(command, env) for side, env in envs.items()}
    if len(set(printed.values())) != 1 or printed["embedded"][1] != n:
        raise AssertionError(f"the walks did not print the same {n} lines: {printed}")
    out: dict[str, list[float]] = {f"{side}{part}": [] for side in envs for part in ("", " cpu", " rss", " server")}
    sides = list(envs)
    for rep in range(reps):
        for side in sides[rep % 3 :] + sides[: rep % 3]:
            before = _servers.cpu_ns(servers[side])
            wall, cpu, rss, code = run_child_cpu(command, envs[side])
            if code != 0:
                raise RuntimeError(f"the {side} walk exited {code}")
            out[side].append(wall)
            out[f"{side} cpu"].append(cpu)
            out[f"{side} rss"].append(rss / 1024)
            out[f"{side} server"].append((_servers.cpu_ns(servers[side]) - before) / 1e9)
    return out


class _Paged:
    """One walk page by page (a `Walk` with a page budget, as `catchup` reads an endpoint without the stream),
    advanced a page at a time so two can alternate; it counts its wall, this process's CPU and its server's."""

    def __init__(self, backend: RemoteBackend, server: int) -> None:
        self.backend = backend
        self.server = server
        self.walk = Walk(backend, RecentQuery(limit=LIMIT), max_pages=1 << 30)
        self.pages: Iterator[list[Entry]] = self.walk.pages()
        self.seen = 0
        self.seconds = self.client_cpu = self.server_cpu = 0.0

    def advance(self) -> bool:
        """One page; False once the walk is over."""
        before = _servers.cpu_ns(self.server)
        cpu = time.process_time()
        started = time.perf_counter()
        page = next(self.pages, None)
        self.seconds += time.perf_counter() - started
        self.client_cpu += time.process_time() - cpu
        self.server_cpu += (_servers.cpu_ns(self.server) - before) / 1e9
        if page is None:
            return False
        self.seen += len(page)
        return True


def paged(serve: tuple[str, int], bare: tuple[str, int], key: str, n: int) -> dict[str, float]:
    """The walk page by page over `mnemo serve` and over the bare app, by the same client (`RemoteBackend`), a page
    of each in turn (each round started by the other), this process on the client's core."""
    walkers = {
        "serve": _Paged(RemoteBackend(serve[0], key), serve[1]),
        "bare": _Paged(RemoteBackend(bare[0], key), bare[1]),
    }
    going = list(walkers.values())
    while going:
        going = [walker for walker in going if walker.advance()][::-1]
    out: dict[str, float] = {}
    for name, walker in walkers.items():
        walker.backend.close()
        if walker.seen != n:
            raise AssertionError(f"the walk over {name} saw {walker.seen} of {n} entries")
        out |= {name: walker.seconds, f"{name} client": walker.client_cpu, f"{name} server": walker.server_cpu}
    return out


def page_latencies(args: tuple[str, str | None, int]) -> list[float]:
    """One walker (its own process): milliseconds of each page of `pages` pages."""
    import httpx

    url, key, pages = args
    headers = {"X-Api-Key": key} if key else {}
    out: list[float] = []
    with httpx.Client(base_url=url, headers=headers) as client:
        cursor = None
        for _ in range(pages):
            t0 = time.perf_counter()
            body = json.loads(client.post("/memory/recent", json={"limit": LIMIT, "cursor": cursor}).content)
            out.append((time.perf_counter() - t0) * 1000)
            cursor = body["next_cursor"]  # at the end (None) the walker starts over from the top
    return out


def concurrent(url: str, key: str | None, pages: int) -> tuple[float, float]:
    """p50 and p99 page latency (ms) of eight walkers at once, each in its own process."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(WALKERS) as pool:
        pool.map(page_latencies, [(url, key, 3)] * WALKERS)  # warm the walkers up
        samples = [ms for walker in pool.map(page_latencies, [(url, key, pages)] * WALKERS) for ms in walker]
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))]


# The anchor of `mnemo recent` against an endpoint: a script that imports httpx and makes the same one request.
_ONE_REQUEST = r"""
import sys, httpx
with httpx.Client() as client:
    answer = client.post(sys.argv[1] + "/memory/recent", json={"limit": 20}, headers={"X-Api-Key": sys.argv[2]})
sys.stdout.write(answer.text)
"""


def cold_start(url: str, key: str, home: Path, reps: int) -> dict[str, Any]:
    """`mnemo recent --limit 20 --format ndjson` against an endpoint vs the one-request httpx script, alternated."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(MNEMO_HOME=str(home / "client"), MNEMO_ENDPOINT=url, MNEMO_API_KEY=key, NO_COLOR="1")
    mnemo = [MNEMO, "recent", "--limit", "20", "--format", "ndjson"]
    script = [sys.executable, "-c", _ONE_REQUEST, url, key]
    for _ in range(3):
        assert run_child(mnemo, env)[2] == 0, "mnemo recent against the endpoint failed"
        assert run_child(script, env)[2] == 0, "the one-request script failed"
    ta, tb, ratios = [], [], []
    for _ in range(reps):
        a = run_child(mnemo, env)[0]
        b = run_child(script, env)[0]
        ta.append(a)
        tb.append(b)
        ratios.append(a / b)
    return {
        "name": "`mnemo recent --limit 20 --format ndjson` against `mnemo serve`, cold start",
        "value": round(statistics.median(ta) * 1000, 1),
        "unit": "ms",
        "anchor": round(statistics.median(tb) * 1000, 1),
        "ratio": round(statistics.median(ratios), 2),
        "goal": "≤ 1.3x",
        "anchor_is": "a script that imports httpx and makes the same one request (byte code compiled; median of alternated pairs)",
    }


def page_reads(store: Path, n: int) -> dict[str, float]:
    """Microseconds an entry of reading `n` entries' pages of 100 laid out as `mnemo serve` lays them, in this
    process: `remote_wire.read_page` (what the streamed walk does with a line) against decoding the same lines whole with
    the standard library, msgspec and (where installed) orjson, in turn, the best of five rounds."""
    import msgspec

    from mnemo_tui.backends.remote_wire import read_page

    db = sqlite3.connect(store)
    wires = [row[0] for row in db.execute("SELECT wire FROM atoms ORDER BY created_at DESC LIMIT ?", (n,))]
    db.close()
    cursor = '"' + "0" * 120 + '"'  # a cursor's length
    lines = [
        ('{"items":[' + ",".join(wires[i : i + LIMIT]) + '],"next_cursor":' + cursor + "}").encode()
        for i in range(0, len(wires), LIMIT)
    ]
    readers: dict[str, Any] = {
        "read_page": lambda line: read_page(line, True),
        "json.loads": json.loads,
        "msgspec.json.decode": msgspec.json.decode,
    }
    try:
        import orjson

        readers["orjson.loads"] = orjson.loads
    except ImportError:
        pass  # no longer a dependency: measured where it is installed
    best = dict.fromkeys(readers, float("inf"))
    for _ in range(5):
        for name, read in readers.items():
            started = time.perf_counter()
            for line in lines:
                read(line)
            best[name] = min(best[name], time.perf_counter() - started)
    return {name: seconds * 1e6 / len(wires) for name, seconds in best.items()}


def run(quick: bool = False) -> list[dict[str, Any]]:
    """The streamed `recent --all` against the embedded one, the walk page by page against the contract-doing bare
    app, `mnemo recent` cold against an endpoint, and page latency under eight concurrent walkers."""
    n = 20_000 if quick else 200_000
    reps = 3 if quick else 6
    pages = 100 if quick else 400
    store = build_store(n)
    admin = Store(store)
    key = admin.create_key(PRINCIPAL)[1]
    admin.close()
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-remote-") as tmp:
        home = Path(tmp)
        serve, serve_url = start_serve(store, home)
        bare, bare_url = start_bare(store)
        try:
            _compiled()
            start = cold_start(serve_url, key, home, 11 if quick else 41)
            walls = streamed_all(store, (serve_url, serve.pid), (bare_url, bare.pid), key, home, n, reps)
            affinity = os.sched_getaffinity(0)
            if TASKSET:
                os.sched_setaffinity(0, {CLIENT_CORE})
            try:
                paged((serve_url, serve.pid), (bare_url, bare.pid), key, n)  # warm-up: page caches, connections
                runs = [paged((serve_url, serve.pid), (bare_url, bare.pid), key, n) for _ in range(max(1, reps // 2))]
            finally:
                os.sched_setaffinity(0, affinity)
            serve_mb, bare_mb = _peak_mb(serve.pid), _peak_mb(bare.pid)
            reads = page_reads(store, min(n, 100_000))
            p50, p99 = concurrent(serve_url, key, pages)
            bare_p50, bare_p99 = concurrent(bare_url, key, pages)
        finally:
            for proc in (serve, bare):
                proc.terminate()
                proc.wait(timeout=30)
    med = {name: statistics.median(values) for name, values in walls.items()}
    ratios = [e / r for e, r in zip(walls["embedded"], walls["remote"], strict=True)]
    page_med = {name: statistics.median(r[name] for r in runs) for name in runs[0]}
    page_ratios = [r["bare"] / r["serve"] for r in runs]
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    embedded_is = (
        f"`mnemo recent --all --format ndjson` on the embedded store (the same {n:,} entries), pinned as the client "
        f"is; alternated, median of {reps} pairs' ratios; load average at the end {load}"
    )
    bare_is = (
        "a bare ASGI app under uvicorn doing the contract's work for a page (key hash looked up, body checked, HMAC "
        "cursor checked and signed, the engine's keyset SQL, stored texts joined), read by the same RemoteBackend"
    )
    return [
        start,
        {
            **_row(
                f"`mnemo recent --all --format ndjson` of {n:,} entries against `mnemo serve` (whole processes, "
                f"client and server pinned to a core each)",
                n / med["remote"],
                n / med["embedded"],
                "≥ 0.6x (moonshot 0.8x)",
                embedded_is,
            ),
            "ratio": round(statistics.median(ratios), 2),
        },
        _cpu("… its client's CPU", med["remote cpu"], med["embedded cpu"], "the embedded walk's CPU (one process)"),
        _cpu("… its server's CPU (every thread)", med["remote server"], med["embedded cpu"], "the embedded walk's CPU"),
        {
            **_row(
                "… the same client against the bare app's stream (the client's share: its server does the contract's work)",
                n / med["bare"],
                n / med["embedded"],
                "—",
                "the embedded walk, as above",
            ),
            "ratio": round(statistics.median(e / b for e, b in zip(walls["embedded"], walls["bare"], strict=True)), 2),
        },
        _cpu("… the bare app's CPU for it", med["bare server"], med["remote server"], "mnemo serve's for its stream"),
        _mb("… the client's peak memory", max(walls["remote rss"]), max(walls["embedded rss"])),
        _mb("… `mnemo serve`'s peak memory", serve_mb, bare_mb, "the bare app's (same store, same pages)"),
        {
            **_row(
                f"the walk page by page at limit {LIMIT} over `mnemo serve` (Walk with a page budget, RemoteBackend)",
                n / page_med["serve"],
                n / page_med["bare"],
                "≥ 0.9x",
                bare_is + f"; a page of each in turn, median of {len(runs)} walks",
            ),
            "ratio": round(statistics.median(page_ratios), 2),
        },
        _cpu("… mnemo serve's CPU a walk", page_med["serve server"], page_med["bare server"], "the bare app's"),
        _cpu(
            "… the client's CPU a walk",
            page_med["serve client"],
            page_med["bare client"],
            "the same client's over the bare app",
        ),
        *(
            {
                "name": f"the page read (`remote_wire.read_page`, what the streamed walk does with a line) against {name}",
                "value": round(reads["read_page"], 2),
                "unit": "µs/entry",
                "anchor": round(reads[name], 2),
                "ratio": round(reads["read_page"] / reads[name], 2),
                "goal": "—",
                "anchor_is": f"{name} of the same lines (pages of {LIMIT} as mnemo serve lays them), one process, best of 5",
            }
            for name in reads
            if name != "read_page"
        ),
        _ms(f"page latency p50, {WALKERS} concurrent walkers (mnemo serve)", p50, bare_p50),
        _ms(f"page latency p99, {WALKERS} concurrent walkers (mnemo serve)", p99, bare_p99),
    ]


def _cpu(name: str, value: float, anchor: float, anchor_is: str) -> dict[str, Any]:
    ratio = round(value / anchor, 2) if anchor else None
    return {
        "name": name,
        "value": round(value, 2),
        "unit": "s",
        "anchor": round(anchor, 2),
        "ratio": ratio,
        "goal": "—",
        "anchor_is": anchor_is,
    }


def _mb(name: str, value: float, anchor: float, anchor_is: str = "the embedded walk's") -> dict[str, Any]:
    ratio = round(value / anchor, 2) if anchor else None
    return {
        "name": name,
        "value": round(value, 1),
        "unit": "MB",
        "anchor": round(anchor, 1),
        "ratio": ratio,
        "goal": "< 100 MB",
        "anchor_is": anchor_is,
    }


def _row(name: str, value: float, anchor: float, goal: str, anchor_is: str) -> dict[str, Any]:
    return {
        "name": name,
        "value": round(value),
        "unit": "entries/s",
        "anchor": round(anchor),
        "ratio": round(value / anchor, 2) if anchor else None,
        "goal": goal,
        "anchor_is": anchor_is,
    }


def _ms(name: str, value: float, anchor: float) -> dict[str, Any]:
    return {
        "name": name,
        "value": round(value, 2),
        "unit": "ms/page",
        "anchor": round(anchor, 2),
        "ratio": round(value / anchor, 2) if anchor else None,
        "goal": "—",
        "anchor_is": "the bare app under the same eight walkers",
    }


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(row)
