"""Provides the benchmarks' report: the machine the figures were measured on, whether each row met its goal, and
the Markdown table `run.py` and the suites run alone print (kept apart from `run.py`, which imports the suites:
a suite importing `run` for these was an import circle)."""

from __future__ import annotations

import os
import platform
import re
import sqlite3
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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
