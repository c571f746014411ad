"""Provides the load benchmark: sixteen concurrent clients mixing writes and walks against `mnemo serve` over loopback.

    python benchmarks/bench_load.py [--quick] [--clients 16] [--seconds 20]

Each client is its own process with one keep-alive HTTP connection (as `RemoteBackend` keeps),
acting as one of four principals that share a room: it writes (half to its own domain, half to
the room) and walks (pages of 50 following cursors, own store or room, up to four pages).
The anchor is the same mix from one client alone, measured in the same run: the ratio says
what sixteen at once cost each request, and what they add to throughput. After the load, every
principal walks its own store and the room to the end: every acknowledged write must appear
exactly once (lost and repeated are counted), and any non-200 answer or failed request is an
error. Errors, lost and repeated must all be 0.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine, markdown
from _servers import start_serve

PRINCIPALS = ("p0", "p1", "p2", "p3")
PAGE = 50
MAX_PAGES = 4
WRITE_SHARE = 0.4


@dataclass
class ClientResult:
    """What one client saw: latencies per kind, errors, the ids it wrote, repeats inside its walks."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: {"write": [], "page": []})
    errors: list[str] = field(default_factory=list)
    written: list[tuple[str, str]] = field(default_factory=list)  # (scope, atom_id)
    repeats_in_walks: int = 0


@dataclass(frozen=True)
class Setup:
    """The served store: its URL, a key per principal, the shared room's address."""

    url: str
    keys: dict[str, str]
    room: str


def _seed(store: Path, per_principal: int) -> tuple[dict[str, str], str]:
    """Keys for the principals, a shared room, and `per_principal` entries each in own store and room."""
    from mnemo_tui import timefmt
    from mnemo_tui.engine.sqlite.store import Store
    from mnemo_tui.values.writes import WriteRequest

    s = Store(store)
    try:
        keys = {p: s.create_key(p)[1] for p in PRINCIPALS}
        room = s.create_room(PRINCIPALS[0], "load").room_id
        code = s.create_invite(PRINCIPALS[0], room, max_uses=10).code
        for p in PRINCIPALS[1:]:
            s.join(p, code)
        now = timefmt.now_us() - 3_600_000_000
        for n, p in enumerate(PRINCIPALS):
            rows = [
                (WriteRequest(content=f"seed {p} {i}: " + "lorem ipsum " * 8, domain=f"seed{i % 3}"), now + i)
                for i in range(per_principal)
            ]
            rows += [
                (WriteRequest(content=f"room seed {p} {i}", domain="xroom:" + room), now + n * per_principal + i)
                for i in range(per_principal // 4)
            ]
            s.bulk_insert([(p, r, t) for r, t in rows])
    finally:
        s.close()
    return keys, "xroom:" + room


def _client(args: tuple[Setup, int, float, float, int, int]) -> ClientResult:
    """One client: writes and walks until `end_at` (wall clock), starting together at `start_at`, and makes
    at least `least` of them whatever the clock says (a loaded machine may start it past `end_at`)."""
    import httpx

    setup, index, start_at, end_at, seed, least = args
    principal = PRINCIPALS[index % len(PRINCIPALS)]
    rng = random.Random(seed * 1000 + index)
    result = ClientResult()
    n = 0
    with httpx.Client(base_url=setup.url, headers={"X-Api-Key": setup.keys[principal]}, timeout=30) as c:
        time.sleep(max(0.0, start_at - time.time()))
        done = 0
        while time.time() < end_at or done < least:
            done += 1
            if rng.random() < WRITE_SHARE:
                scope = setup.room if rng.random() < 0.5 else f"c{index}"
                body: dict[str, Any] = {"content": f"client {index} write {n}: " + "x" * rng.randint(20, 400)}
                body["domain"] = scope
                started = time.perf_counter()
                try:
                    resp = c.post("/memory/write", json=body)
                except httpx.HTTPError as exc:
                    result.errors.append(f"write: {type(exc).__name__}")
                    continue
                result.latencies["write"].append((time.perf_counter() - started) * 1000)
                if resp.status_code != 200:
                    result.errors.append(f"write: {resp.status_code} {resp.text[:120]}")
                else:
                    result.written.append((scope if scope == setup.room else "", resp.json()["atom_id"]))
                n += 1
                continue
            query: dict[str, Any] = {"limit": PAGE}
            if rng.random() < 0.4:
                query["domain"] = setup.room
            seen: set[str] = set()
            for _ in range(MAX_PAGES):
                started = time.perf_counter()
                try:
                    resp = c.post("/memory/recent", json=query)
                except httpx.HTTPError as exc:
                    result.errors.append(f"page: {type(exc).__name__}")
                    break
                result.latencies["page"].append((time.perf_counter() - started) * 1000)
                if resp.status_code != 200:
                    result.errors.append(f"page: {resp.status_code} {resp.text[:120]}")
                    break
                page = resp.json()
                ids = [i["atom_id"] for i in page["items"]]
                result.repeats_in_walks += sum(1 for i in ids if i in seen)
                seen.update(ids)
                if page["next_cursor"] is None or time.time() >= end_at:
                    break
                query["cursor"] = page["next_cursor"]
    return result


def _audit(setup: Setup, written: list[tuple[str, str, str]]) -> tuple[int, int]:
    """Walk every principal's own store and the room to the end: (lost, repeated) acknowledged writes."""
    import httpx

    lost = repeated = 0
    for principal in PRINCIPALS:
        scopes: list[str | None] = [None] + ([setup.room] if principal == PRINCIPALS[0] else [])
        for scope in scopes:
            wanted = {a for p, s, a in written if (s or None) == scope and (scope is not None or p == principal)}
            seen: Counter[str] = Counter()
            with httpx.Client(base_url=setup.url, headers={"X-Api-Key": setup.keys[principal]}, timeout=60) as c:
                query: dict[str, Any] = {"limit": 100, "domain": scope}
                while True:
                    page = c.post("/memory/recent", json=query).json()
                    seen.update(i["atom_id"] for i in page["items"])
                    if page["next_cursor"] is None:
                        break
                    query["cursor"] = page["next_cursor"]
            lost += len(wanted - set(seen))
            repeated += sum(n - 1 for n in seen.values() if n > 1)
    return lost, repeated


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def run_load(setup: Setup, clients: int, seconds: float, seed: int = 1, least: int = 0) -> dict[str, Any]:
    """Run `clients` client processes for `seconds` (each making at least `least` writes or walks); returns
    throughput, latencies, errors, lost and repeated."""
    ctx = multiprocessing.get_context("fork")
    start_at = time.time() + 1.0 + clients * 0.05  # every process is up before the clock starts
    end_at = start_at + seconds
    with ctx.Pool(clients) as pool:
        results = pool.map(_client, [(setup, i, start_at, end_at, seed, least) for i in range(clients)])
    writes = [x for r in results for x in r.latencies["write"]]
    pages = [x for r in results for x in r.latencies["page"]]
    written = [(PRINCIPALS[i % len(PRINCIPALS)], s, a) for i, r in enumerate(results) for s, a in r.written]
    lost, repeated = _audit(setup, written)
    every = writes + pages
    return {
        "clients": clients,
        "seconds": seconds,
        "requests": len(every),
        "throughput": len(every) / seconds,
        "p50": _pct(every, 50),
        "p99": _pct(every, 99),
        "write_p99": _pct(writes, 99),
        "page_p99": _pct(pages, 99),
        "mean": statistics.fmean(every) if every else float("nan"),
        "writes": len(writes),
        "pages": len(pages),
        "errors": sum(len(r.errors) for r in results),
        "error_samples": [e for r in results for e in r.errors][:5],
        "repeats_in_walks": sum(r.repeats_in_walks for r in results),
        "lost": lost,
        "repeated": repeated,
    }


def measure(
    quick: bool, clients: int = 16, seconds: float | None = None, least: int = 0
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(one client alone, `clients` at once) against one fresh `mnemo serve`; each client makes at least `least`
    writes or walks (the test's count, so that no clock decides whether anything was done)."""
    loaded_for = seconds if seconds is not None else (4.0 if quick else 20.0)
    with tempfile.TemporaryDirectory(prefix="mnemo-load-") as tmp:
        home = Path(tmp)
        store = home / "store.db"
        keys, room = _seed(store, 500 if quick else 5_000)
        proc, url = start_serve(store, home)
        try:
            setup = Setup(url=url, keys=keys, room=room)
            alone = run_load(setup, 1, max(2.0, loaded_for / 3), least=least)
            loaded = run_load(setup, clients, loaded_for, least=least)
        finally:
            proc.terminate()
            proc.wait(timeout=15)
        log = (home / "serve.log").read_text(errors="replace")
        loaded["server_tracebacks"] = log.count("Traceback")
        loaded["keys_in_log"] = sum(k in log for k in keys.values())
    return alone, loaded


def rows_of(alone: dict[str, Any], loaded: dict[str, Any]) -> list[dict[str, Any]]:
    """The figures as rows for benchmarks/run.py."""
    n = loaded["clients"]
    mix = f"{int(WRITE_SHARE * 100)}% writes, 60% pages of {PAGE}"

    def ratio(a: float, b: float) -> float | None:
        return round(a / b, 2) if b and b == b else None

    return [
        {
            "name": f"load: requests/s, {n} clients ({mix})",
            "value": round(loaded["throughput"], 1),
            "unit": "req/s",
            "anchor": round(alone["throughput"], 1),
            "ratio": ratio(loaded["throughput"], alone["throughput"]),
            "goal": "≥ 1x",
            "anchor_is": "the same mix from 1 client alone",
        },
        {
            "name": f"load: p50 latency, {n} clients",
            "value": round(loaded["p50"], 2),
            "unit": "ms",
            "anchor": round(alone["p50"], 2),
            "ratio": ratio(loaded["p50"], alone["p50"]),
            "goal": "≤ 50 ms",
            "anchor_is": "p50 of 1 client alone",
        },
        {
            "name": f"load: p99 latency, {n} clients",
            "value": round(loaded["p99"], 2),
            "unit": "ms",
            "anchor": round(alone["p99"], 2),
            "ratio": ratio(loaded["p99"], alone["p99"]),
            "goal": "≤ 250 ms",
            "anchor_is": "p99 of 1 client alone",
        },
        {
            "name": f"load: write p99, {n} clients",
            "value": round(loaded["write_p99"], 2),
            "unit": "ms",
            "anchor": round(alone["write_p99"], 2),
            "ratio": ratio(loaded["write_p99"], alone["write_p99"]),
            "goal": "≤ 250 ms",
            "anchor_is": "write p99 of 1 client alone",
        },
        {
            "name": f"load: page p99, {n} clients",
            "value": round(loaded["page_p99"], 2),
            "unit": "ms",
            "anchor": round(alone["page_p99"], 2),
            "ratio": ratio(loaded["page_p99"], alone["page_p99"]),
            "goal": "≤ 250 ms",
            "anchor_is": "page p99 of 1 client alone",
        },
        {
            "name": f"load: errors in {loaded['requests']:,} requests (non-200 or failed)",
            "value": loaded["errors"] + alone["errors"],
            "unit": "",
            "anchor": None,
            "ratio": None,
            "goal": "≤ 0",
        },
        {
            "name": "load: acknowledged writes lost or repeated in the final walks, repeats inside walks",
            "value": loaded["lost"] + loaded["repeated"] + loaded["repeats_in_walks"] + alone["lost"],
            "unit": "",
            "anchor": None,
            "ratio": None,
            "goal": "≤ 0",
        },
    ]


def run(quick: bool) -> list[dict[str, Any]]:
    """Rows `{name, value, unit, anchor, ratio, goal}` for benchmarks/run.py: this suite's clients, then
    `wrk` against a bare ASGI app (benchmarks/bench_wrk.py)."""
    import bench_wrk

    alone, loaded = measure(quick)
    return rows_of(alone, loaded) + bench_wrk.run(quick)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="4 s of load on a small store instead of 20 s")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=None, help="seconds of load with every client")
    parser.add_argument("--json", type=Path, help="also write the raw figures as JSON")
    args = parser.parse_args(argv)
    alone, loaded = measure(args.quick, args.clients, args.seconds)
    rows = rows_of(alone, loaded)
    notes = [
        f"{loaded['clients']} client processes for {loaded['seconds']:.0f} s: {loaded['writes']:,} writes, "
        f"{loaded['pages']:,} pages; 1 client alone for {alone['seconds']:.0f} s: {alone['requests']:,} requests.",
        f"server log: {loaded['server_tracebacks']} traceback(s), {loaded['keys_in_log']} key(s) in the access log.",
    ]
    if loaded["error_samples"]:
        notes.append("first errors: " + "; ".join(loaded["error_samples"]))
    sys.stdout.write(markdown(rows, notes, machine()))
    if args.json:
        args.json.write_text(json.dumps({"alone": alone, "loaded": loaded}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
