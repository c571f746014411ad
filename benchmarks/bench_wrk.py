"""Provides the server load benchmark against a bare ASGI anchor: `wrk` drives the write/page mix, pinned off the server's core.

    python benchmarks/bench_wrk.py [--quick] [--seconds 10] [--connections 16] [--rounds 5] [--framework | --operations]

`mnemo serve` (as a user starts it: access log on, to a file) and a bare ASGI callable that runs
the engine's own statements for the same two requests (the key lookup, then a write: `BEGIN
IMMEDIATE`, the bucket and its clock, the row, its full-text row, the clock back, `COMMIT`; or a
keyset page of 50) on one `sqlite3` connection, both under uvicorn's h11 protocol with the bounds of `server/edges.py`,
each on its own copy of the same seeded store. The server is pinned to core 0 and Debian's `wrk`
(one thread, 16 connections, `wrk_mix.lua`: 40% writes, 60% pages, half of them following the
last cursor seen) to core 1 with `taskset`, so the load generator does not eat the server's CPU.
Runs alternate between the two servers (mnemo, bare, bare, mnemo, ...: which goes first alternates
too), and both the medians and the median of each round's ratio are reported; the latter is the goal's
figure, as a round's two runs are the nearest in time on a host whose own rate swings. Without `wrk` or
`taskset` (or with fewer than 2 cores) the figures say so and are not measured.

`--framework` (issue 49) runs the same alternation with the engine's three calls of the mix answering at once in
both servers (the key's principal, a write, a page: what the store answered first), and a third server, the same
canned bare app as a two-route Starlette application: what Starlette itself costs a request, and what the rest
of `mnemo serve` around the engine costs (the middleware, the body's validation, the access line, the answer).
Its figure is the servers' CPU a request: the rate is bounded by `wrk` itself there (its script reads each page
for the cursor). These are not the goal's figures.

`--operations` (issue 63) compares `mnemo serve` with itself instead: as users run it (request ids and
Prometheus metrics on) and with both off (`serve(observed=False)`, the access line as before), the
same alternation; their ratio is what the ids and the metrics cost.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _servers import cpu_ns, free_port, start_serve  # noqa: E402

WRK = shutil.which("wrk")
TASKSET = shutil.which("taskset")
SCRIPT = HERE / "wrk_mix.lua"
PRINCIPAL = "p0"
SERVER_CORE, LOAD_CORE = "0", "1"

# The anchor: the statements the engine runs for the same requests (traced from `Store.write` and
# `Store.recent`), in the event loop, with no framework, thread hop, validation, signing or log.
_BARE = r"""
import hashlib, json, sqlite3, sys, time, uuid
from datetime import UTC, datetime
import uvicorn

db = sqlite3.connect(sys.argv[1], isolation_level=None, check_same_thread=False)
db.execute("PRAGMA journal_mode = WAL"); db.execute("PRAGMA synchronous = NORMAL"); db.execute("PRAGMA busy_timeout = 30000")
KEY = "SELECT principal, revoked_at, key_hash FROM api_keys WHERE key_hash = ?"
PAGE = ("SELECT a.created_at, a.atom_id, a.wire FROM atoms a WHERE a.bucket = "
        "(SELECT bucket FROM buckets WHERE kind = 'own' AND owner = ?) {after}AND a.superseded_by IS NULL "
        "ORDER BY a.created_at DESC, a.atom_id DESC LIMIT ?")
INSERT = ("INSERT INTO atoms(atom_id, bucket, domain, created_at, content, concepts, metadata, principal, agent, "
          "agent_name, client_env, external_ref, supersedes, wire, fingerprint) VALUES (?,?,?,?,?,'[]',NULL,?,NULL,NULL,'cli',NULL,NULL,?,NULL)")

def iso(us):
    return datetime.fromtimestamp(us / 1e6, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

def who(headers):
    key = dict(headers).get(b"x-api-key", b"").decode()
    row = db.execute(KEY, (hashlib.sha256(key.encode()).hexdigest(),)).fetchone()
    return None if row is None or row[1] is not None else row[0]

def write(principal, body):
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("SELECT coalesce(max(seq), 0) FROM atoms").fetchone()
        bucket = db.execute("SELECT bucket FROM buckets WHERE kind = 'own' AND owner = ?", (principal,)).fetchone()[0]
        last = db.execute("SELECT last_created_at FROM buckets WHERE bucket = ?", (bucket,)).fetchone()[0]
        created = max(time.time_ns() // 1000, last + 1)
        atom = str(uuid.uuid4())
        wire = json.dumps({"atom_id": atom, "content": body["content"], "domain": body["domain"], "created_at": iso(created),
                           "concepts": [], "provenance": {"principal": principal, "agent": None, "agent_name": None,
                           "client_env": "cli", "is_external": False}}, ensure_ascii=False, separators=(",", ":"))
        seq = db.execute(INSERT, (atom, bucket, body["domain"], created, body["content"], principal, wire)).lastrowid
        db.execute("INSERT INTO atoms_fts(rowid, body) VALUES (?, ?)", (seq, " ".join(f"b{bucket}x" + w for w in body["content"].split())))
        db.execute("UPDATE buckets SET last_created_at = ? WHERE bucket = ?", (created, bucket))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return ('{"atom_id":"' + atom + '","superseded":[],"reason":null}').encode()

def page(principal, body):
    limit = body.get("limit", 20)
    cursor = body.get("cursor")
    if cursor:
        at, atom = cursor.split("_", 1)
        rows = db.execute(PAGE.format(after="AND (a.created_at, a.atom_id) < (?, ?) "), (principal, int(at), atom, limit + 1)).fetchall()
    else:
        rows = db.execute(PAGE.format(after=""), (principal, limit + 1)).fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    nxt = f'"{rows[-1][0]}_{rows[-1][1]}"' if more else "null"
    return ('{"items":[' + ",".join(r[2] for r in rows) + '],"next_cursor":' + nxt + "}").encode()

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    raw = b""
    while True:
        message = await receive()
        raw += message.get("body", b"")
        if not message.get("more_body"):
            break
    principal = who(scope["headers"])
    if principal is None:
        status, out = 401, b'{"code":"UNAUTHORIZED"}'
    else:
        body = json.loads(raw) if raw else {}
        status, out = 200, (write if scope["path"].endswith("/write") else page)(principal, body)
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": out})

# The server stack `mnemo serve` runs: uvicorn's h11 protocol under the edges' bounds (issue 32).
from mnemo_tui.server.edges import Edges
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning", access_log=False, **Edges().uvicorn_options())
"""


def missing() -> str | None:
    """Why the benchmark cannot run here, or None."""
    if WRK is None:
        return "wrk is not installed (apt-get install wrk; scripts/setup-dev.sh)"
    if TASKSET is None:
        return "taskset is not installed (util-linux)"
    if (os.cpu_count() or 1) < 2:
        return "fewer than 2 cores: server and wrk cannot be pinned apart"
    return None


def seed(path: Path, entries: int) -> str:
    """A store with `entries` entries of `p0` in a few domains; returns p0's key."""
    sys.path.insert(0, str(HERE.parent))
    from mnemo_tui import timefmt
    from mnemo_tui.engine.sqlite.store import Store
    from mnemo_tui.values.writes import WriteRequest

    store = Store(path)
    try:
        key = store.create_key(PRINCIPAL)[1]
        start = timefmt.now_us() - 3_600_000_000
        store.bulk_insert(
            [
                (PRINCIPAL, WriteRequest(content=f"seed {i}: " + "lorem ipsum " * 8, domain=f"seed{i % 3}"), start + i)
                for i in range(entries)
            ]
        )
    finally:
        store.close()
    return key


def _pinned(cmd: list[str], core: str) -> list[str]:
    assert TASKSET is not None
    return [TASKSET, "-c", core, *cmd]


def start_mnemo(store: Path, home: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`mnemo serve` pinned to the server core (taskset execs it there; every thread inherits it)."""
    proc, url = start_serve(store, home, [TASKSET or "taskset", "-c", SERVER_CORE])
    return proc, url.removesuffix("/api/v1")


# `mnemo serve`'s own `serve()` with request ids and metrics on or off (`observed`), logging to stderr as the
# command does: both variants start alike, so only the switch differs.
_SERVE = (
    "import sys; from pathlib import Path; from mnemo_tui.server.run import serve; "
    "sys.exit(serve(Path(sys.argv[1]), port=0, observed=sys.argv[2] == 'on'))"
)


# `--framework`: the same `serve()` with the engine's three calls of the mix (the key's principal, a write, a page)
# answering at once with what the store answered first, so the server costs what the framework and the contract
# around the engine cost (the bare app is given the same canned answers: `_CANNED`).
_SERVE_CANNED = _SERVE.replace(
    "sys.exit(",
    "from mnemo_tui.engine.sqlite.store import Store; from mnemo_tui.values.model import RecentQuery; "
    "from mnemo_tui.values.writes import WriteResult; store = Store(Path(sys.argv[1]), create=False); "
    "page = store.recent_wire_pages('p0', RecentQuery(limit=50), 1, 1 << 30); store.close(); "
    "Store.principal_for_key = lambda self, key: 'p0'; "
    "Store.write = lambda self, who, req: WriteResult('0193a1b2-c3d4-4e5f-8a9b-0c1d2e3f4a5b', (), True); "
    "Store.recent_wire_pages = lambda self, who, q, pages, most: page; sys.exit(",
)
_CANNED = """
_page, _written = page("p0", {"limit": 50}), write("p0", {"content": "canned", "domain": "w"})
who, write, page = (lambda headers: "p0"), (lambda principal, body: _written), (lambda principal, body: _page)
"""
# And the same canned app as a Starlette application of two routes: what the framework alone costs a request.
_STARLETTE = """
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

async def endpoint(request):
    principal = who(request.scope["headers"])
    raw = await request.body()
    out = (write if request.url.path.endswith("/write") else page)(principal, json.loads(raw) if raw else {})
    return Response(out, media_type="application/json")

app = Starlette(routes=[Route(f"/api/v1/memory/{name}", endpoint, methods=["POST"]) for name in ("write", "recent")])
"""


def start_serve_fn(
    store: Path, home: Path, observed: bool, script: str = _SERVE
) -> tuple[subprocess.Popen[bytes], str]:
    """`run.serve()` over `store` (or `script`), request ids and metrics on or off, pinned to the server core."""
    log_path = home / f"serve-{'on' if observed else 'off'}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")} | {"MNEMO_HOME": str(home)}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            _pinned([sys.executable, "-c", script, str(store), "on" if observed else "off"], SERVER_CORE),
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
        )
    for _ in range(600):  # bounded: 30 s
        found = re.search(r"ready at (http://\S+)/api/v1", log_path.read_text(errors="replace"))
        if found:
            return proc, found.group(1)
        if proc.poll() is not None:
            raise RuntimeError("the server exited: " + log_path.read_text(errors="replace"))
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the server did not start")


def middleware_cost(requests: int = 20_000, rounds: int = 5) -> dict[str, float]:
    """The access log's middleware alone, over an app that answers at once, in this process: microseconds a
    request without request ids and metrics and with them (medians of alternated rounds)."""
    import asyncio

    from mnemo_tui.server.metrics import Metrics
    from mnemo_tui.server.middleware import AccessLog

    class Route:
        path = "/api/v1/memory/recent"

    async def app(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        scope["route"] = Route
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b"{}"})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b'{"limit": 50}'}

    async def send(message: dict[str, Any]) -> None:
        return None

    headers = [(b"host", b"127.0.0.1"), (b"x-api-key", b"mk_live_x"), (b"content-type", b"application/json")]
    lines: list[str] = []

    async def timed(middleware: Any) -> float:
        started = time.perf_counter()
        for _ in range(requests):
            scope = {
                "type": "http",
                "method": "POST",
                "path": Route.path,
                "headers": headers,
                "client": ("127.0.0.1", 1),
            }
            await middleware(scope, receive, send)
        lines.clear()
        return (time.perf_counter() - started) / requests * 1e6

    async def alternate() -> dict[str, list[float]]:
        plain, observed = AccessLog(app, lines.append), AccessLog(app, lines.append, metrics=Metrics())
        got: dict[str, list[float]] = {"unobserved": [], "observed": []}
        for _ in range(rounds):
            got["unobserved"].append(await timed(plain))
            got["observed"].append(await timed(observed))
        return got

    got = asyncio.run(alternate())
    return {name: round(statistics.median(values), 2) for name, values in got.items()}


def measure_operations(quick: bool, seconds: float | None = None, connections: int = 16) -> dict[str, Any]:
    """Alternated wrk runs against `mnemo serve` with request ids and metrics, and without: the medians, and the
    median of each round's ratio (on a loaded machine the rate swings 2x from one run to the next, and a
    round's two runs are the nearest in time)."""
    span = seconds if seconds is not None else (4.0 if quick else 5.0)
    rounds = 2 if quick else 10
    with tempfile.TemporaryDirectory(prefix="mnemo-wrk-") as tmp:
        home = Path(tmp)
        on_store, off_store = home / "on.db", home / "off.db"
        key = seed(on_store, 2_000 if quick else 20_000)
        shutil.copyfile(on_store, off_store)
        on, on_url = start_serve_fn(on_store, home, observed=True)
        off, off_url = start_serve_fn(off_store, home, observed=False)
        runs: dict[str, list[dict[str, float]]] = {"observed": [], "unobserved": []}
        try:
            drive(on_url, key, 1, connections)
            drive(off_url, key, 1, connections)
            for n in range(rounds):  # which goes first alternates too: neither always meets the warmer cache
                order = [("observed", on_url), ("unobserved", off_url)]
                for name, url in order if n % 2 == 0 else order[::-1]:
                    runs[name].append(drive(url, key, span, connections))
        finally:
            for proc in (on, off):
                proc.terminate()
                proc.wait(timeout=30)
    median = {name: {k: statistics.median(r[k] for r in got) for k in got[0]} for name, got in runs.items()}
    cost = middleware_cost()
    ratio = median["observed"]["rate"] / median["unobserved"]["rate"] if median["unobserved"]["rate"] else None
    return {
        "observed": median["observed"],
        "unobserved": median["unobserved"],
        "rate_ratio": round(ratio, 3) if ratio else None,
        "rate_ratio_by_round": round(
            statistics.median(a["rate"] / b["rate"] for a, b in zip(runs["observed"], runs["unobserved"], strict=True)),
            3,
        ),
        "middleware_us_a_request": cost,
        "each_run": {name: [round(r["rate"]) for r in got] for name, got in runs.items()},
        "rounds": rounds,
        "seconds": span,
        "connections": connections,
    }


def start_bare(store: Path, canned: bool = False, starlette: bool = False) -> tuple[subprocess.Popen[bytes], str]:
    """The bare ASGI app under uvicorn, pinned to the server core (`canned`: its three calls answer at once;
    `starlette`: and inside a Starlette application)."""
    import httpx

    port = free_port()
    extra = (_CANNED if canned else "") + (_STARLETTE if starlette else "")
    source = _BARE.replace("# The server stack", extra + "# The server stack")
    proc = subprocess.Popen(
        _pinned([sys.executable, "-c", source, str(store), str(port)], SERVER_CORE),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(400):
        try:
            httpx.post(url + "/api/v1/memory/recent", json={"limit": 1}, timeout=2)
            return proc, url
        except httpx.TransportError:
            if proc.poll() is not None:
                raise RuntimeError("the bare app exited") from None
            time.sleep(0.05)
    raise RuntimeError("the bare app did not start")


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    found = re.fullmatch(r"([0-9.]+)(us|ms|s)", text)
    if not found:
        raise ValueError(f"not a wrk latency: {text!r}")
    return float(found.group(1)) * _UNITS[found.group(2)]


def parse(out: str) -> dict[str, float]:
    """Requests/s, p50 and p99 (ms), and errors (non-2xx answers plus socket errors) from wrk's report."""
    rate = re.search(r"Requests/sec:\s+([0-9.]+)", out)
    p50 = re.search(r"\s50%\s+(\S+)", out)
    p99 = re.search(r"\s99%\s+(\S+)", out)
    total = re.search(r"(\d+) requests in", out)
    if not (rate and p50 and p99 and total):
        raise RuntimeError("unexpected wrk output:\n" + out)
    errors = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses:\s+(\d+)", out))
    socket = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    socket_errors = sum(int(n) for n in socket.groups()) if socket else 0
    errors += socket_errors
    return {
        "socket_errors": float(socket_errors),
        "rate": float(rate.group(1)),
        "p50": _ms(p50.group(1)),
        "p99": _ms(p99.group(1)),
        "requests": float(total.group(1)),
        "errors": float(errors),
    }


def drive(url: str, key: str, seconds: float, connections: int, pid: int | None = None) -> dict[str, float]:
    """One wrk run against `url`, pinned to the load core; with the server's `pid`, also the CPU its every thread
    spent a request (`cpu_us`), which a loaded machine moves far less than the rate."""
    assert WRK is not None
    env = dict(os.environ, MNEMO_BENCH_KEY=key)
    cmd = _pinned(
        [WRK, "-t1", f"-c{connections}", f"-d{seconds:g}s", "--latency", "--timeout", "10s", "-s", str(SCRIPT), url],
        LOAD_CORE,
    )
    before = cpu_ns(pid)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    spent = cpu_ns(pid) - before
    got = parse(out)
    if pid is not None and got["requests"]:
        got["cpu_us"] = spent / 1e3 / got["requests"]
    return got


# An access line of `mnemo serve` (`middleware.access_line`): `host:port "METHOD path" status ...`.
_ACCESS = re.compile(r'^\S+ "(\S+) (\S+)" (\d{3}) ')


def refusals(log: str) -> dict[str, Any]:
    """What a run's errors were, from the server's log written meanwhile: every access line not 200 counted by
    status and path, and the first few lines that are not access lines (a refusal at the HTTP edge, a 408
    or a connection cap's 503, is answered before any access line; a traceback)."""
    statuses: dict[str, int] = {}
    other: list[str] = []
    for line in log.splitlines():
        found = _ACCESS.match(line)
        if found is None:
            if line.strip() and len(other) < 10:
                other.append(line[:300])
        elif found.group(3) != "200":
            name = f"{found.group(3)} {found.group(1)} {found.group(2)}"
            statuses[name] = statuses.get(name, 0) + 1
    return {"statuses": statuses, "other_lines": other}


def measure(
    quick: bool, seconds: float | None = None, connections: int = 16, rounds: int | None = None, canned: bool = False
) -> dict[str, Any]:
    """Alternated wrk runs against mnemo serve and the bare app, which one goes first alternating too: the median
    of each figure per server, the median of each round's rate ratio (a round's two runs are the nearest in
    time, and the host's own rate swings 2x from one run to the next), and for every run of mnemo serve with
    errors what they were (`refusals`). `canned`: both with the engine's calls answering at once (`--framework`)."""
    span = seconds if seconds is not None else (4.0 if quick else 10.0)
    rounds = rounds if rounds is not None else (2 if quick else 5)
    with tempfile.TemporaryDirectory(prefix="mnemo-wrk-") as tmp:
        home = Path(tmp)
        mnemo_store, bare_store = home / "mnemo.db", home / "bare.db"
        key = seed(mnemo_store, 2_000 if quick else 20_000)
        shutil.copyfile(mnemo_store, bare_store)
        if canned:
            mnemo, mnemo_url = start_serve_fn(mnemo_store, home, observed=True, script=_SERVE_CANNED)
            log_path = home / "serve-on.log"
        else:
            mnemo, mnemo_url = start_mnemo(mnemo_store, home)
            log_path = home / "serve.log"
        anchors = {"bare": start_bare(bare_store, canned)}
        if canned:
            shutil.copyfile(mnemo_store, home / "starlette.db")
            anchors["starlette"] = start_bare(home / "starlette.db", canned, starlette=True)
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in ("mnemo", *anchors)}
        named: list[dict[str, Any]] = []

        def drive_anchors() -> None:
            for name, (proc, url) in anchors.items():
                runs[name].append(drive(url, key, span, connections, proc.pid))

        mnemo_pid = mnemo.pid
        try:
            for _, url in (mnemo, mnemo_url), *anchors.values():
                drive(url, key, 1, connections)  # warm-up: connections, page cache, code paths
            for n in range(rounds):
                if n % 2:  # neither always meets the cache the other warmed
                    drive_anchors()
                start = log_path.stat().st_size
                got = drive(mnemo_url, key, span, connections, mnemo_pid)
                runs["mnemo"].append(got)
                if got["errors"]:
                    with open(log_path, "rb") as log_file:
                        log_file.seek(start)
                        written = log_file.read().decode(errors="replace")
                    named.append({"run": n, "errors": int(got["errors"])} | refusals(written))
                if not n % 2:
                    drive_anchors()
        finally:
            for proc in (mnemo, *(proc for proc, _ in anchors.values())):
                proc.terminate()
                proc.wait(timeout=30)
        log = log_path.read_text(errors="replace")
    median = {
        name: {k: statistics.median(r[k] for r in got) for k in got[0]} | {"errors": sum(r["errors"] for r in got)}
        for name, got in runs.items()
    }
    by_round = [m["rate"] / b["rate"] for m, b in zip(runs["mnemo"], runs["bare"], strict=True) if b["rate"]]
    return {
        **median,
        "rate_ratio_by_round": round(statistics.median(by_round), 3) if by_round else None,
        "each_round": [round(r, 3) for r in by_round],
        "rounds": rounds,
        "seconds": span,
        "connections": connections,
        "tracebacks": log.count("Traceback"),
        "errors_named": named,
        "key_in_log": key in log,
    }


def rows_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    m, b, c = result["mnemo"], result["bare"], result["connections"]
    anchor = f"a bare ASGI app running the engine's statements, same uvicorn stack and pinning (median of {result['rounds']} alternated runs)"
    return [
        {
            "name": f"server load (wrk, {c} connections, 40% writes, 60% pages of 50; server and wrk on separate cores): requests/s",
            "value": round(m["rate"]),
            "unit": "req/s",
            "anchor": round(b["rate"]),
            "ratio": round(m["rate"] / b["rate"], 2) if b["rate"] else None,
            "goal": "≥ 0.8x",
            "anchor_is": anchor,
        },
        {
            "name": "server load (wrk): the median of each round's requests/s ratio (the goal's figure on a noisy host)",
            "value": result["rate_ratio_by_round"],
            "unit": "x",
            "anchor": None,
            "ratio": result["rate_ratio_by_round"],
            "goal": "≥ 0.8x",
            "anchor_is": "each round's bare run; the rounds' ratios: "
            + ", ".join(f"{r:.2f}" for r in result["each_round"]),
        },
        {
            "name": "server load (wrk): the server's CPU a request (every thread; a loaded machine moves it less than the rate)",
            "value": round(m["cpu_us"]) if "cpu_us" in m else None,
            "unit": "µs",
            "anchor": round(b["cpu_us"]) if "cpu_us" in b else None,
            "ratio": round(m["cpu_us"] / b["cpu_us"], 2) if b.get("cpu_us") and "cpu_us" in m else None,
            "goal": "—",
            "anchor_is": anchor,
        },
        {
            "name": "server load (wrk): p50 latency",
            "value": round(m["p50"], 2),
            "unit": "ms",
            "anchor": round(b["p50"], 2),
            "ratio": round(m["p50"] / b["p50"], 2) if b["p50"] else None,
            "goal": "—",
            "anchor_is": anchor,
        },
        {
            "name": "server load (wrk): p99 latency",
            "value": round(m["p99"], 2),
            "unit": "ms",
            "anchor": round(b["p99"], 2),
            "ratio": round(m["p99"] / b["p99"], 2) if b["p99"] else None,
            "goal": "≤ 1.5x",
            "anchor_is": anchor,
        },
        {
            "name": f"server load (wrk): errors (non-2xx or socket) in {int(m['requests']):,} requests a run, mnemo serve",
            "value": int(m["errors"]) + result["tracebacks"],
            "unit": "",
            "anchor": None,
            "ratio": None,
            "goal": "≤ 0",
        },
    ]


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Rows for benchmarks/run.py (one row saying why, when wrk cannot run here)."""
    why = missing()
    if why is not None:
        return [
            {
                "name": "server load (wrk) against a bare ASGI app",
                "value": None,
                "unit": "",
                "anchor": None,
                "ratio": None,
                "goal": "≥ 0.8x",
                "anchor_is": f"not measured: {why}",
            }
        ]
    return rows_of(measure(quick))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=None, help="alternated rounds (5; 2 with --quick)")
    parser.add_argument("--operations", action="store_true", help="request ids and metrics on against off (issue 63)")
    parser.add_argument(
        "--framework", action="store_true", help="both servers with the engine's calls answering at once (issue 49)"
    )
    args = parser.parse_args(argv)
    why = missing()
    if why is not None:
        print(f"not measured: {why}")
        return 0
    if args.operations:
        print(json.dumps(measure_operations(args.quick, args.seconds, args.connections), indent=2))
        return 0
    result = measure(args.quick, args.seconds, args.connections, args.rounds, canned=args.framework)
    print(json.dumps(result, indent=2))
    if args.framework:  # not the goal's figures: what is left when the engine costs nothing
        m, b, f = (result[name]["cpu_us"] for name in ("mnemo", "bare", "starlette"))
        # The rate is wrk's here (its script reads every page for the cursor), not the servers': CPU is the figure.
        print(
            f"the server's CPU a request, the engine's calls canned: mnemo serve {m:.0f} µs, the bare app {b:.0f} µs, "
            f"the bare app in Starlette {f:.0f} µs (Starlette's own: {f - b:.0f} µs; the rest of mnemo serve's: {m - f:.0f} µs)"
        )
        return 0
    for row in rows_of(result):
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
