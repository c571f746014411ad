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
import platform
import re
import sqlite3
import subprocess
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

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
}
_GOAL = re.compile(r"^\s*(≤|<=|<|≥|>=|>)\s*([0-9.]+)\s*(x|×)?", re.IGNORECASE)


def machine() -> dict[str, str]:
    """What the figures were measured on."""
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        cli = subprocess.run(["sqlite3", "--version"], capture_output=True, text=True, check=False).stdout.split()[0]
    except (OSError, IndexError):
        cli = "not installed"
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "sqlite3 CLI": cli,
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def met(row: dict[str, Any]) -> str:
    """`yes`, `NO` or `—`: a goal ending in `x` applies to the ratio, any other to the value."""
    match = _GOAL.match(str(row.get("goal") or ""))
    if not match:
        return "—"
    op, bound, on_ratio = match.group(1), float(match.group(2)), bool(match.group(3))
    figure = row.get("ratio") if on_ratio else row.get("value")
    if figure is None:
        return "—"
    ok = {
        "≤": figure <= bound,
        "<=": figure <= bound,
        "<": figure < bound,
        "≥": figure >= bound,
        ">=": figure >= bound,
        ">": figure > bound,
    }[op]
    return "yes" if ok else "NO"


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def markdown(rows: list[dict[str, Any]], notes: list[str], info: dict[str, str]) -> str:
    """The results as a Markdown section: machine, table, notes."""
    lines = [
        f"Measured {info['date']} on {info['nproc']} × {info['cpu']}, Python {info['python']}, "
        f"SQLite {info['sqlite']} (CLI {info['sqlite3 CLI']}); load average (1, 5, 15 min) at the start "
        f"{info.get('load at start', '?')}, at the end {info['load']}.",
        "",
        "| figure | value | anchor | ratio | goal | met | anchor is |",
        "| --- | ---: | ---: | ---: | --- | --- | --- |",
    ]
    for row in rows:
        unit = row.get("unit", "")
        lines.append(
            f"| {row['name']} | {_fmt(row.get('value'))} {unit} | {_fmt(row.get('anchor'))} {unit} | "
            f"{_fmt(row.get('ratio'))} | {row.get('goal') or '—'} | {met(row)} | {row.get('anchor_is', '')} |"
        )
    if notes:
        lines += ["", *[f"- {n}" for n in notes]]
    return "\n".join(lines) + "\n"


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
