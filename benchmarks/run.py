"""Provides the one entry point of mnemo's benchmarks: every tracked figure as a ratio against its anchor, as Markdown.

    python benchmarks/run.py [--quick] [--only engine,cli,remote,tui,follow] [--out FILE] [--json FILE]

Each suite module exposes `run(quick: bool) -> list[dict]`; a row is
`{name, value, unit, anchor, ratio, goal}` (plus an optional `anchor_is` saying what the anchor
is). Anchors are measured in the same run, so the ratios hold across machines better than the
raw figures do. `--quick` uses stores a tenth of the size.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _report import machine, markdown  # noqa: E402

SUITES = {
    "engine": "bench_engine",
    "cli": "bench_cli",
    "remote": "bench_remote",
    "remote-cli": "bench_remote_cli",
    "tui": "bench_tui",
    "load": "bench_load",
    "mcp": "bench_mcp",
    "follow": "bench_follow",
    "consumers": "bench_consumers",
    "subscribe": "bench_subscribe",
}


def run_suites(names: list[str], quick: bool) -> tuple[list[dict[str, Any]], list[str]]:
    """Run each named suite; a missing module or a failing suite becomes a note, never a crash."""
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for name in names:
        module_name = SUITES[name]
        if not (HERE / f"{module_name}.py").exists():
            notes.append(f"{name}: benchmarks/{module_name}.py is not present; not measured")
            continue
        started = time.perf_counter()
        print(f"[{name}] running…", file=sys.stderr, flush=True)
        try:
            module = importlib.import_module(module_name)
            got = module.run(quick)
        except Exception as exc:  # noqa: BLE001 - one broken suite must not hide the others' figures
            traceback.print_exc()
            notes.append(f"{name}: failed ({type(exc).__name__}: {exc}); not measured")
            continue
        rows += got
        print(f"[{name}] {len(got)} figure(s) in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return rows, notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run mnemo's benchmarks and print a Markdown table.")
    parser.add_argument("--quick", action="store_true", help="stores a tenth of the size")
    parser.add_argument("--only", default=",".join(SUITES), help="comma-separated suites: " + ", ".join(SUITES))
    parser.add_argument("--out", type=Path, help="also write the Markdown to this file")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON to this file")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        parser.error(f"unknown suite(s): {', '.join(unknown)}")
    started_load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    rows, notes = run_suites(names, args.quick)
    info = machine()
    info["load at start"] = started_load
    if args.quick:
        notes.insert(0, "--quick: stores a tenth of the full size; the committed figures come from a full run")
    text = markdown(rows, notes, info)
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text)
    if args.json:
        args.json.write_text(json.dumps({"machine": info, "rows": rows, "notes": notes}, ensure_ascii=False, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
