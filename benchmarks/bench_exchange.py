"""Provides the export/import benchmark (issue 42): `mnemo export` and `mnemo import` of a large store, against
`sqlite3 .dump` and loading that dump (a plain INSERT load of the same rows) into an empty file.

    python benchmarks/bench_exchange.py [--entries N]     # default 1,000,000 (the store is cached)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cli import MNEMO, SQLITE3, _compiled, _env, run_child
from bench_engine import build_store


def _sh(command: str) -> list[str]:
    # A shell redirects the output to a file; wait4's rusage covers the shell's waited-for child too.
    return ["/bin/sh", "-c", command]


def measure(n: int) -> list[dict[str, Any]]:
    """Export and import rates and peak RSS for a store of `n` entries, each beside its sqlite3 anchor."""
    if SQLITE3 is None:
        raise SystemExit("the sqlite3 command-line shell is needed for the anchors")
    _compiled()
    store = build_store(n)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        env = _env(store, tmp)
        export_file, dump_file = Path(tmp) / "export.ndjson", Path(tmp) / "dump.sql"
        took, rss, code = run_child(_sh(f"{MNEMO} export > {export_file}"), env)
        assert code == 0
        a_took, a_rss, a_code = run_child(_sh(f"{SQLITE3} {store} .dump > {dump_file}"), env)
        assert a_code == 0
        rows.append(_row("export", n, took, rss, a_took, a_rss, "sqlite3 .dump"))
        target, plain = Path(tmp) / "imported.db", Path(tmp) / "plain.db"
        took, rss, code = run_child(_sh(f"{MNEMO} --store {target} import {export_file}"), env)
        assert code == 0
        a_took, a_rss, a_code = run_child(_sh(f"{SQLITE3} {plain} < {dump_file}"), env)
        assert a_code == 0
        rows.append(_row("import", n, took, rss, a_took, a_rss, "sqlite3 loading the dump (INSERTs)"))
        sizes = {p.name: p.stat().st_size for p in (export_file, dump_file)}
        print(f"sizes: {sizes}", file=sys.stderr)
    return rows


def _row(name: str, n: int, took: float, rss: int, a_took: float, a_rss: int, anchor: str) -> dict[str, Any]:
    return {
        "name": f"mnemo {name}, {n:,} entries",
        "rate": n / took,
        "seconds": took,
        "rss_mb": rss / 1024,
        "anchor": anchor,
        "anchor_rate": n / a_took,
        "anchor_seconds": a_took,
        "anchor_rss_mb": a_rss / 1024,
        "ratio": a_took / took,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=1_000_000)
    args = parser.parse_args()
    print(f"load: {os.getloadavg()}", file=sys.stderr)
    print("| figure | mnemo | rate/s | peak RSS | anchor | anchor rate/s | anchor RSS | mnemo/anchor rate |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in measure(args.entries):
        print(
            f"| {r['name']} | {r['seconds']:.1f} s | {r['rate']:,.0f} | {r['rss_mb']:.0f} MB | {r['anchor']} | "
            f"{r['anchor_rate']:,.0f} | {r['anchor_rss_mb']:.0f} MB | {r['ratio']:.2f}x |"
        )
    print(f"load after: {os.getloadavg()}", file=sys.stderr)


if __name__ == "__main__":
    main()
