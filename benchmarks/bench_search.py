"""Provides the search benchmark: a query over a large store before and after stems, as ratios to plain FTS5 in
the same run; the reindex's entries per second on both engines; and the write path's cost of stemming.

    python benchmarks/bench_search.py [--entries 1000000] [--pg-entries 200000] [--json out.json]

The store is bench_engine's cached one (benchmarks/.data/, gitignored). Beside the engine's index it
gets two FTS5 tables of its own, built once and kept in the cached file: `bench_plain`, FTS5's own
tokenizer over the content (the anchor: plain FTS, no buckets, no stems), and `bench_old`, the index as
it was before stems (bucket-stamped, unstemmed content only), whose query is the "before".
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT, ROOT / "benchmarks"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from bench_engine import PRINCIPAL, _alternate, build_store  # noqa: E402

from mnemo_tui.engine import fts  # noqa: E402
from mnemo_tui.engine.sqlite import schema  # noqa: E402
from mnemo_tui.engine.sqlite.store import Store  # noqa: E402
from mnemo_tui.values.search import SearchQuery  # noqa: E402
from mnemo_tui.values.writes import WriteRequest  # noqa: E402

QUERIES = ["deploy", "flaky retry", "12345", "zebra"]  # common, two common words, 10 entries, none
TOP_K = 10
_OLD_TOKEN = re.compile(r"[^\W_]+")
_ROWS = "SELECT a.created_at, a.atom_id, a.wire, a.superseded_by, {score} AS score FROM {table} JOIN atoms a ON a.seq = {table}.rowid "
_TAIL = " WHERE {table} MATCH ? AND a.superseded_by IS NULL ORDER BY score DESC, a.created_at DESC LIMIT ?"


def _sql(table: str) -> str:
    return (_ROWS + _TAIL).format(table=table, score=f"-bm25({table})")


def _side_tables(path: Path) -> None:
    """The anchor's table and the old index's, built once into the cached store."""
    db = sqlite3.connect(path, isolation_level=None)
    have = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "bench_plain" not in have:
        started = time.perf_counter()
        db.execute("BEGIN")
        db.execute("CREATE VIRTUAL TABLE bench_plain USING fts5(content, content='atoms', content_rowid='seq')")
        db.execute("INSERT INTO bench_plain(bench_plain) VALUES ('rebuild')")
        db.execute("COMMIT")
        print(f"built bench_plain in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    if "bench_old" not in have:
        started = time.perf_counter()
        db.execute("BEGIN")
        db.execute("CREATE VIRTUAL TABLE bench_old USING fts5(body, content='')")
        rows = db.execute("SELECT seq, bucket, content FROM atoms")
        db.executemany(
            "INSERT INTO bench_old(rowid, body) VALUES (?, ?)",
            ((s, " ".join(f"b{b}x{t}" for t in _OLD_TOKEN.findall(c))) for s, b, c in rows),
        )
        db.execute("COMMIT")
        print(f"built bench_old in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    db.close()


def _old_match(bucket: int, query: str) -> str:
    return " OR ".join('"' + " ".join(f"b{bucket}x{t}" for t in _OLD_TOKEN.findall(w)) + '"' for w in query.split())


def queries(path: Path, reps: int, asked: list[str]) -> list[dict[str, Any]]:
    store = Store(path)
    bare = sqlite3.connect(path)
    bucket = int(bare.execute("SELECT bucket FROM buckets WHERE owner = ?", (PRINCIPAL,)).fetchone()[0])
    out = []
    for q in asked:
        plain_expr = " OR ".join(f'"{w}"' for w in q.split())

        def plain(expr: str = plain_expr) -> Any:
            return bare.execute(_sql("bench_plain"), (expr, TOP_K)).fetchall()

        def engine(text: str = q) -> Any:
            return store.search(PRINCIPAL, SearchQuery(query=text, top_k=TOP_K))

        def after_sql(expr: str = fts.match(bucket, q.split())) -> Any:
            return bare.execute(_sql("atoms_fts"), (expr, TOP_K)).fetchall()

        def before_sql(expr: str = _old_match(bucket, q)) -> Any:
            return bare.execute(_sql("bench_old"), (expr, TOP_K)).fetchall()

        engine_us, plain_a = _alternate(engine, plain, reps)
        after_us, plain_b = _alternate(after_sql, plain, reps)
        before_us, plain_c = _alternate(before_sql, plain, reps)
        out.append(
            {
                "query": q,
                "hits_plain": bare.execute(
                    "SELECT count(*) FROM bench_plain WHERE bench_plain MATCH ?", (plain_expr,)
                ).fetchone()[0],
                "plain_us": round(plain_a, 1),
                "before_ratio": round(before_us / plain_c, 2),
                "after_sql_ratio": round(after_us / plain_b, 2),
                "after_engine_ratio": round(engine_us / plain_a, 2),
                "before_us": round(before_us, 1),
                "after_engine_us": round(engine_us, 1),
            }
        )
    store.close()
    bare.close()
    return out


def reindex_sqlite(path: Path) -> dict[str, Any]:
    """The whole reindex of the store (`reindex_search`, the path migration 7 takes), in place."""
    store = Store(path)
    started = time.perf_counter()
    indexed = store.reindex_search(fts.DEFAULT_LANGUAGE)
    seconds = time.perf_counter() - started
    store.close()
    return {"entries": indexed, "seconds": round(seconds, 1), "entries_per_s": round(indexed / seconds)}


def reindex_postgres(entries: int) -> dict[str, Any]:
    from bench_postgres import fill

    from mnemo_tui.engine.postgres.store import PgStore
    from tests.support import pg

    cluster = pg.start_cluster()
    databases = pg.Databases(cluster)
    try:
        url = cluster.url(databases.create())
        started = time.perf_counter()
        fill(url, entries)
        filled = time.perf_counter() - started
        store = PgStore(url)
        started = time.perf_counter()
        indexed = store.reindex_search(fts.DEFAULT_LANGUAGE)
        seconds = time.perf_counter() - started
        store.close()
        return {
            "entries": indexed,
            "seconds": round(seconds, 1),
            "entries_per_s": round(indexed / seconds),
            "fill_entries_per_s": round(entries / filled),
        }
    finally:
        databases.close()
        pg.stop_cluster(cluster)


def write_cost(tmp: Path, n: int = 5000) -> dict[str, Any]:
    """µs per entry of a bulk insert with the stemmer, and with it replaced by no stemming, alternately."""
    rows = [
        (PRINCIPAL, WriteRequest(f"Deployed the flaky runners again, entry {i}", concepts=("deploy",)), i)
        for i in range(n)
    ]
    real = fts.stemmer(fts.DEFAULT_LANGUAGE)
    timings: dict[str, list[float]] = {"stemmed": [], "unstemmed": []}
    for round_ in range(6):
        for kind in ("stemmed", "unstemmed"):
            fts._STEMMERS[fts.DEFAULT_LANGUAGE] = real if kind == "stemmed" else (lambda words: words)
            path = tmp / f"w-{kind}-{round_}.db"
            store = Store(path)
            started = time.perf_counter()
            store.bulk_insert(rows)
            timings[kind].append((time.perf_counter() - started) / n * 1e6)
            store.close()
            for suffix in ("", "-wal", "-shm"):
                Path(str(path) + suffix).unlink(missing_ok=True)
    fts._STEMMERS[fts.DEFAULT_LANGUAGE] = real
    stemmed, unstemmed = (sorted(timings[k])[len(timings[k]) // 2] for k in ("stemmed", "unstemmed"))
    return {
        "stemmed_us_per_entry": round(stemmed, 1),
        "unstemmed_us_per_entry": round(unstemmed, 1),
        "ratio": round(stemmed / unstemmed, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--pg-entries", type=int, default=200_000)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--skip", action="append", default=[], choices=["queries", "sqlite", "postgres", "writes"])
    parser.add_argument("--queries", nargs="+", default=QUERIES)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    figures: dict[str, Any] = {"entries": args.entries}
    path = build_store(args.entries)
    Store(path).close()  # an older cached store is migrated (and reindexed) here, outside the figures
    assert fts.pending(sqlite3.connect(path)) is None and schema.LATEST
    if "queries" not in args.skip:
        _side_tables(path)
        figures["queries"] = queries(path, args.reps, args.queries)
        print(json.dumps(figures["queries"], indent=1), flush=True)
    if "writes" not in args.skip:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            figures["writes"] = write_cost(Path(tmp))
        print(json.dumps(figures["writes"]), flush=True)
    if "sqlite" not in args.skip:
        figures["reindex_sqlite"] = reindex_sqlite(path)
        print(json.dumps(figures["reindex_sqlite"]), flush=True)
    if "postgres" not in args.skip:
        figures["reindex_postgres"] = reindex_postgres(args.pg_entries)
        print(json.dumps(figures["reindex_postgres"]), flush=True)
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
