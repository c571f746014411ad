"""Provides the PostgreSQL benchmarks: an engine page deep in a large bucket against the bare keyset SQL through
psycopg, and requests per second with 1, 2 and 3 `mnemo serve` processes over one database.

    python benchmarks/bench_postgres.py [--quick] [--depth 500000] [--seconds 10] [--clients 6]

It starts its own PostgreSQL cluster (as the tests do: tests/support/pg.py) unless `--database URL`
names one (an empty database). On a two-core machine the servers share the cores with the database
and the load generator, so the server figures show the design's overhead, not its scale.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repository: tests.support
MNEMO = str(Path(sys.executable).parent / "mnemo")
KEYSET = (
    "SELECT created_at, atom_id, wire, superseded_by FROM atoms WHERE bucket = %s AND (created_at, atom_id) < (%s, %s) "
    "AND superseded_by IS NULL ORDER BY created_at DESC, atom_id DESC LIMIT %s"
)


def fill(url: str, entries: int) -> None:
    from mnemo_tui.engine.postgres.store import PgStore
    from mnemo_tui.values.writes import WriteRequest

    store = PgStore(url)
    start = 1_700_000_000_000_000
    try:
        for low in range(0, entries, 20_000):
            rows = [
                ("bench", WriteRequest(content=f"entry {i} about deploys and caches", domain=f"d{i % 6}"), start + i)
                for i in range(low, min(entries, low + 20_000))
            ]
            store.bulk_insert(rows)
        with store.reading() as db:
            db.execute("ANALYZE atoms")
    finally:
        store.close()


def deep_page(url: str, depth: int, runs: int) -> dict[str, Any]:
    """Median time of `PgStore.recent` (limit 20) at `depth` against the same keyset statement through psycopg."""
    import psycopg

    from mnemo_tui.engine import cursor as cursors
    from mnemo_tui.engine.postgres.store import PgStore
    from mnemo_tui.values.model import RecentQuery

    store = PgStore(url)
    bare = psycopg.connect(url, autocommit=True)
    try:
        with store.reading() as db:
            bucket = db.execute("SELECT bucket FROM buckets WHERE owner = 'bench'").fetchone()[0]
            pos = db.execute(
                "SELECT created_at, atom_id FROM atoms WHERE bucket = ? ORDER BY created_at DESC, atom_id DESC "
                "LIMIT 1 OFFSET ?",
                (bucket, depth),
            ).fetchone()
        query = RecentQuery(
            limit=20, cursor=cursors.encode(store.secret, cursors.binding("bench", RecentQuery(limit=20)), *pos)
        )
        engine, sql = [], []
        for _ in range(runs):
            a = time.perf_counter_ns()
            store.recent("bench", query)
            b = time.perf_counter_ns()
            bare.execute(KEYSET, (bucket, pos[0], pos[1], 21), prepare=True).fetchall()
            c = time.perf_counter_ns()
            engine.append(b - a)
            sql.append(c - b)
        e, s = statistics.median(engine) / 1e6, statistics.median(sql) / 1e6
        return {"depth": depth, "engine_ms": round(e, 3), "bare_ms": round(s, 3), "ratio": round(e / s, 2)}
    finally:
        store.close()
        bare.close()


def _client(args: tuple[list[str], str, float, int]) -> dict[str, int]:
    """One load client: 30% writes, 70% pages of 50 (up to four, following cursors); each request to the next server."""
    import random

    import httpx

    urls, key, seconds, seed = args
    rng = random.Random(seed)
    clients = [httpx.Client(base_url=u, headers={"X-Api-Key": key}, timeout=60) for u in urls]
    done = errors = 0
    turn = seed
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if rng.random() < 0.3:
            calls = [("/memory/write", {"content": f"load {seed} {done}", "domain": f"l{seed % 4}"})]
        else:
            calls = [("/memory/recent", {"limit": 50})]
        cursor = None
        for page in range(4 if calls[0][0] == "/memory/recent" else 1):
            path, body = calls[0]
            if cursor is not None:
                body = {**body, "cursor": cursor}
            turn += 1
            r = clients[turn % len(clients)].post(path, json=body)
            done += 1
            if r.status_code != 200:
                errors += 1
                break
            cursor = r.json().get("next_cursor") if path == "/memory/recent" else None
            if cursor is None or page == 3:
                break
    for c in clients:
        c.close()
    return {"requests": done, "errors": errors}


def load(url: str, servers: int, clients: int, seconds: float, home: Path) -> dict[str, Any]:
    from mnemo_tui.engine.postgres.store import PgStore
    from tests.support.serve import start_serve

    store = PgStore(url)
    key = store.create_key("bench")[1]
    store.close()
    running = []
    try:
        for i in range(servers):
            (home / f"s{servers}-{i}").mkdir(parents=True, exist_ok=True)
            running.append(start_serve(home / f"s{servers}-{i}", "--database", url, "--workers", "4"))
        urls = [s.url for s in running]
        with multiprocessing.get_context("spawn").Pool(clients) as pool:
            started = time.monotonic()
            results = pool.map(_client, [(urls, key, seconds, i) for i in range(clients)])
            took = time.monotonic() - started
        total = sum(r["requests"] for r in results)
        return {
            "servers": servers,
            "requests_per_s": round(total / took, 1),
            "per_core": round(total / took / multiprocessing.cpu_count(), 1),
            "errors": sum(r["errors"] for r in results),
        }
    finally:
        for s in running:
            s.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="depth 50,000 and 4 s of load")
    parser.add_argument("--depth", type=int, default=500_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--database", help="an empty database to use instead of a cluster of its own")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    depth = 50_000 if args.quick else args.depth
    seconds = 4.0 if args.quick else args.seconds
    import tempfile

    from tests.support import pg

    cluster = None
    if args.database:
        urls = [args.database] * 4
    else:
        cluster = pg.start_cluster()
        databases = pg.Databases(cluster)
        urls = [cluster.url(databases.create()) for _ in range(4)]
    try:
        figures: dict[str, Any] = {}
        started = time.monotonic()
        fill(urls[0], depth + 2_000)
        figures["fill_seconds"] = round(time.monotonic() - started, 1)
        figures["deep_page"] = deep_page(urls[0], depth, 300)
        print(json.dumps(figures), flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            figures["load"] = [load(urls[n], n, args.clients, seconds, Path(tmp)) for n in (1, 2, 3)]
        print(json.dumps(figures, indent=2))
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2) + "\n")
    finally:
        if cluster is not None:
            databases.close()
            pg.stop_cluster(cluster)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
