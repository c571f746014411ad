"""Provides the removals benchmark (issue 50): a domain wipe's tombstones (all at one instant) read a page at a
time, as ratios to the same window read whole in the same run, on the embedded engine.

    python benchmarks/bench_removals.py [--removals 50000] [--json out.json]

A page starts where the last one ended (`(removed_at, atom_id)`, one range of the index): the ratio stays
near 1 whatever the page size; a page that scanned its instant from the start made it grow with the wipe.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mnemo_tui.engine.sqlite.store import Store  # noqa: E402
from mnemo_tui.values.removals import read_pages  # noqa: E402
from mnemo_tui.values.writes import WriteRequest  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--removals", type=int, default=50_000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "s.db")
        try:
            for start in range(0, args.removals, 500):
                batch = [
                    WriteRequest(content=f"bulk {i}", domain="bulk")
                    for i in range(start, min(args.removals, start + 500))
                ]
                store.write_batch("alice", batch)
            store.delete_domain("alice", "bulk")
            began = time.perf_counter()
            whole = len(store.removals("alice", None, None).items)
            anchor = time.perf_counter() - began
            figures: dict[str, float] = {"removals": whole, "whole_s": round(anchor, 3)}
            for limit in (1000, 100):
                began = time.perf_counter()
                read = read_pages(lambda at, n=limit: store.removals("alice", None, None, limit=n, start=at))
                assert len(read.items) == whole
                figures[f"pages_of_{limit}_ratio"] = round((time.perf_counter() - began) / anchor, 2)
        finally:
            store.close()
    print(json.dumps(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
