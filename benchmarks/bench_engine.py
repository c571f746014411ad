"""Provides the engine benchmark (a feed page at the top and deep in a large store) and the large-store builder.

Stores are built with raw `executemany` in one transaction, with the wire JSON precomputed by the
engine's own `wire_item`, into a file whose schema the engine created; they are cached under
`benchmarks/.data/` (gitignored) and reused by every benchmark that needs one.
"""

from __future__ import annotations

import random
import sqlite3
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mnemo_tui.engine import cursor as cursors  # noqa: E402
from mnemo_tui.engine import fts  # noqa: E402
from mnemo_tui.engine.rules import wire_item  # noqa: E402
from mnemo_tui.engine.sqlite.store import Store  # noqa: E402
from mnemo_tui.values.model import RecentQuery  # noqa: E402
from mnemo_tui.values.writes import WriteRequest  # noqa: E402

DATA = Path(__file__).resolve().parent / ".data"
PRINCIPAL = "local"
PAGE = 20
_WORDS = [
    "build",
    "deploy",
    "test",
    "failed",
    "passed",
    "flaky",
    "retry",
    "cache",
    "migration",
    "schema",
    "index",
    "cursor",
    "watermark",
    "room",
    "agent",
    "review",
    "merge",
    "branch",
    "release",
    "rollback",
    "incident",
    "latency",
    "timeout",
    "queue",
    "worker",
    "token",
    "budget",
    "plan",
    "note",
    "decision",
    "owner",
    "customer",
    "report",
    "metric",
    "alert",
    "dashboard",
    "memory",
    "feed",
    "scope",
    "since",
    "until",
    "search",
    "query",
]
_DOMAINS = ("general", "work", "ops", "notes", "research")
_AGENTS = ("build-bot", "review-bot", "planner", "alice")
_INSERT = (
    "INSERT INTO atoms(atom_id, bucket, domain, created_at, content, concepts, metadata, principal, agent,"
    " agent_name, client_env, external_ref, supersedes, wire) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)


def _rows(n: int, bucket: int, start: int, seed: int) -> list[tuple[Any, ...]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        created = start + i * 1000  # 1 ms apart: strictly increasing, as the engine's clock makes them
        words = rng.choices(_WORDS, k=rng.randint(8, 40))
        content = f"{' '.join(words).capitalize()}. Entry {i} of the benchmark store."
        concepts = tuple(rng.sample(_WORDS, rng.randint(0, 3)))
        agent = rng.choice(_AGENTS)
        atom = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        req = WriteRequest(
            content=content, domain=rng.choice(_DOMAINS), concepts=concepts, agent=agent, agent_name=agent
        )
        concepts_json = "[" + ",".join(f'"{c}"' for c in concepts) + "]"
        wire = wire_item(atom, req, created, PRINCIPAL)
        rows.append(
            (
                atom,
                bucket,
                req.domain,
                created,
                content,
                concepts_json,
                None,
                PRINCIPAL,
                agent,
                agent,
                "cli",
                None,
                None,
                wire,
            )
        )
    return rows


def build_store(n: int, name: str | None = None, *, seed: int = 7) -> Path:
    """A store of `n` entries of principal `local` (cached under benchmarks/.data/); returns its path.

    The engine creates the file and its schema; the rows go in through one raw `executemany` in one
    transaction with the feed indexes and the full-text trigger dropped, then the exact same index
    and trigger statements are replayed and the full-text index rebuilt.
    """
    DATA.mkdir(exist_ok=True)
    path = DATA / (name or f"store-{n}.db")
    if path.exists():
        db = sqlite3.connect(path)
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'bench_rows'").fetchone()
        except sqlite3.DatabaseError:
            row = None
        db.close()
        if row is not None and int(row[0]) == n:
            return path
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
    started = time.perf_counter()
    Store(path).close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = OFF")
    db.execute("BEGIN IMMEDIATE")
    bucket = int(db.execute("INSERT INTO buckets(kind, owner) VALUES ('own', ?)", (PRINCIPAL,)).lastrowid or 0)
    replay = db.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE tbl_name = 'atoms' AND sql IS NOT NULL "
        "AND type IN ('index', 'trigger') ORDER BY type, name"
    ).fetchall()
    for kind, obj, _sql in replay:
        db.execute(f"DROP {kind.upper()} {obj}")
    start = time.time_ns() // 1000 - n * 1000 - 60_000_000
    chunk = 100_000
    for offset in range(0, n, chunk):
        db.executemany(_INSERT, _rows(min(chunk, n - offset), bucket, start + offset * 1000, seed + offset))
    for _kind, _obj, sql in replay:
        db.execute(sql)
    fts.add_since(db, 0, fts.DEFAULT_LANGUAGE)  # the engine's own indexing of every row (contentless)
    last = start + (n - 1) * 1000
    db.execute("UPDATE buckets SET last_created_at = ? WHERE bucket = ?", (last, bucket))
    db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('bench_rows', ?)", (str(n).encode(),))
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.execute("ANALYZE")
    db.close()
    print(f"built {path.name}: {n:,} entries in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return path


def _median_us(samples: list[int]) -> float:
    return statistics.median(samples) / 1000


def _alternate(a: Any, b: Any, reps: int) -> tuple[float, float]:
    """Median µs of `a()` and of `b()`, called alternately `reps` times each after a warm-up."""
    for _ in range(5):
        a()
        b()
    ta, tb = [], []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        a()
        t1 = time.perf_counter_ns()
        b()
        t2 = time.perf_counter_ns()
        ta.append(t1 - t0)
        tb.append(t2 - t1)
    return _median_us(ta), _median_us(tb)


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Engine page at the top and at half depth against the bare SQL through `sqlite3`, and the OFFSET page."""
    n = 100_000 if quick else 1_000_000
    depth = n // 2
    reps = 300 if quick else 1000
    path = build_store(n)
    store = Store(path)
    bare = sqlite3.connect(path)
    bucket = bare.execute("SELECT bucket FROM buckets WHERE kind = 'own' AND owner = ?", (PRINCIPAL,)).fetchone()[0]
    # The engine's statement selects what it returns: the feed keeps only rows no later version replaced,
    # so it does not read `superseded_by` (engine/feed.py, `FeedPlan.spliced`); nor does the anchor.
    keyset = (
        "SELECT created_at, atom_id, wire FROM atoms WHERE bucket = ? {extra}"
        "AND superseded_by IS NULL ORDER BY created_at DESC, atom_id DESC LIMIT ?"
    )
    top_sql = keyset.format(extra="")
    deep_sql = keyset.format(extra="AND (created_at, atom_id) < (?, ?) ")
    offset_sql = (
        "SELECT created_at, atom_id, wire FROM atoms WHERE bucket = ? AND superseded_by IS NULL "
        "ORDER BY created_at DESC, atom_id DESC LIMIT ? OFFSET ?"
    )
    position = bare.execute(
        "SELECT created_at, atom_id FROM atoms WHERE bucket = ? ORDER BY created_at DESC, atom_id DESC LIMIT 1 OFFSET ?",
        (bucket, depth - 1),
    ).fetchone()
    query = RecentQuery(limit=PAGE)
    cursor = cursors.encode(store.secret, cursors.binding(PRINCIPAL, query), position[0], position[1])
    deep = RecentQuery(limit=PAGE, cursor=cursor)
    engine_first = store.recent(PRINCIPAL, deep).items
    bare_first = bare.execute(deep_sql, (bucket, *position, PAGE)).fetchall()
    if [e.atom_id for e in engine_first] != [r[1] for r in bare_first]:
        raise AssertionError("the engine's page at depth differs from the bare keyset page: it repeats or skips")

    top_engine, top_bare = _alternate(
        lambda: store.recent(PRINCIPAL, query), lambda: bare.execute(top_sql, (bucket, PAGE + 1)).fetchall(), reps
    )
    deep_engine, deep_bare = _alternate(
        lambda: store.recent(PRINCIPAL, deep),
        lambda: bare.execute(deep_sql, (bucket, *position, PAGE + 1)).fetchall(),
        reps,
    )
    # The page as wire texts read row by row (what `recent --all` prints), with its cursor.
    wire_engine, wire_bare = _alternate(
        lambda: store.recent_wire(PRINCIPAL, deep),
        lambda: bare.execute(deep_sql, (bucket, *position, PAGE + 1)).fetchall(),
        reps,
    )
    offset_reps = 5 if quick else 9
    offset_page, deep_bare_again = _alternate(
        lambda: bare.execute(offset_sql, (bucket, PAGE, depth)).fetchall(),
        lambda: bare.execute(deep_sql, (bucket, *position, PAGE + 1)).fetchall(),
        offset_reps,
    )
    store.close()
    bare.close()
    size = f"{n:,}-entry store"
    return [
        _row(f"engine page at the top ({size}), `Entry` values", top_engine, top_bare, "≤ 1.5x"),
        _row(
            f"engine page at depth {depth:,} ({size}), `Entry` values (`Store.recent`)",
            deep_engine,
            deep_bare,
            "≤ 1.5x",
        ),
        _row(
            f"engine page at depth {depth:,}, wire texts (`Store.recent_wire`, row by row)",
            wire_engine,
            wire_bare,
            "≤ 1.5x",
        ),
        _row(f"OFFSET page at depth {depth:,}, for comparison", offset_page, deep_bare_again, "—"),
    ]


def _row(name: str, value: float, anchor: float, goal: str) -> dict[str, Any]:
    return {
        "name": name,
        "value": round(value, 1),
        "unit": "µs/page",
        "anchor": round(anchor, 1),
        "ratio": round(value / anchor, 2) if anchor else None,
        "goal": goal,
        "anchor_is": "the same keyset SQL through bare sqlite3" if goal != "—" else "the keyset page at that depth",
    }


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(row)
