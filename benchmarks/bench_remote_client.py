"""Provides the client's side of the streamed remote walk alone: `mnemo recent --all --format ndjson` against one
`mnemo serve`, its CPU (and instructions) against the embedded walk's, or against another tree of the package.

`bench_remote.py` measures the whole comparison (and the page-by-page walk, the bare apps, the cold start); this
measures what the client's own work costs, for cutting it: whole processes, the client pinned to core 0 and the
server to core 1, alternated, each side's CPU from `wait4` (the server's from every thread's schedstat). With
`--before DIR` (a tree holding `mnemo_tui/`, e.g. `git archive main mnemo_tui | tar -x -C DIR`), the same remote
walk run from that tree (first on `PYTHONPATH`) in turn with this checkout's. `--instructions`: each side's
instructions once, under callgrind (the same figure whatever else the machine runs).

Run: `.venv/bin/python benchmarks/bench_remote_client.py [--quick] [--reps N] [--before DIR] [--instructions]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _servers  # noqa: E402
from bench_cli import VALGRIND, _compiled, instructions, run_child_cpu  # noqa: E402
from bench_engine import PRINCIPAL, build_store  # noqa: E402
from bench_remote import CLIENT_CORE, MNEMO, _env, _pinned, _printed, start_serve  # noqa: E402

from mnemo_tui.engine.sqlite.store import Store  # noqa: E402

WALK = ["recent", "--all", "--format", "ndjson"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 entries instead of 200,000")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--before", type=Path, help="a tree holding mnemo_tui/ to alternate the remote walk with")
    parser.add_argument("--instructions", action="store_true", help="each side's instructions once (callgrind)")
    args = parser.parse_args()
    n = 20_000 if args.quick else 200_000
    store = build_store(n)
    admin = Store(store)
    key = admin.create_key(PRINCIPAL)[1]
    admin.close()
    _compiled()
    if args.before is not None:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(args.before / "mnemo_tui")], check=True)
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-client-") as tmp:
        home = Path(tmp)
        serve, url = start_serve(store, home)
        try:
            remote = _env(home / "remote", MNEMO_ENDPOINT=url, MNEMO_API_KEY=key)
            envs = {"embedded": _env(home / "embedded", MNEMO_STORE=str(store), MNEMO_PRINCIPAL=PRINCIPAL)}
            if args.before is not None:
                envs["before"] = {**remote, "PYTHONPATH": str(args.before.resolve())}
            envs["remote"] = remote
            command = [*_pinned(CLIENT_CORE), MNEMO, *WALK]
            printed = {side: _printed(command, env) for side, env in envs.items()}
            if len(set(printed.values())) != 1 or printed["embedded"][1] != n:
                raise AssertionError(f"the walks did not print the same {n} lines: {printed}")
            rows = rounds(command, envs, serve.pid, args.reps)
            counted = (
                {side: instructions([MNEMO, *WALK], env) for side, env in envs.items()} if args.instructions else {}
            )
        finally:
            serve.terminate()
            serve.wait(timeout=30)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{n:,} entries, {args.reps} alternated rounds, load at the end {load}")
    for side, (walls, cpus, servers) in rows.items():
        line = f"{side:9s} wall {statistics.median(walls):.3f} s  client CPU {statistics.median(cpus):.3f} s"
        line += f" (min {min(cpus):.3f})  server CPU {statistics.median(servers):.3f} s"
        if side in counted:
            line += f"  instructions {counted[side] / 1e9:.2f}G"
        print(line)
    embedded = rows["embedded"][0]
    for side in rows.keys() - {"embedded"}:
        ratios = [e / r for e, r in zip(embedded, rows[side][0], strict=True)]
        print(f"{side} / embedded entries/s: {statistics.median(ratios):.2f}x (median of the rounds' ratios)")
    if "before" in rows:
        cpus = [a / b for a, b in zip(rows["remote"][1], rows["before"][1], strict=True)]
        print(f"client CPU, this checkout / before: {statistics.median(cpus):.2f}x")


def rounds(
    command: list[str], envs: dict[str, dict[str, str]], server: int, reps: int
) -> dict[str, tuple[list[float], list[float], list[float]]]:
    """Each side's walls, client CPU and server CPU over `reps` rounds, each round started one side further on."""
    out: dict[str, tuple[list[float], list[float], list[float]]] = {side: ([], [], []) for side in envs}
    sides = list(envs)
    for rep in range(reps):
        for side in sides[rep % len(sides) :] + sides[: rep % len(sides)]:
            before = _servers.cpu_ns(server)
            wall, cpu, _, code = run_child_cpu(command, envs[side])
            if code != 0:
                raise RuntimeError(f"the {side} walk exited {code}")
            walls, cpus, servers = out[side]
            walls.append(wall)
            cpus.append(cpu)
            servers.append((_servers.cpu_ns(server) - before) / 1e9 if side != "embedded" else 0.0)
    return out


if __name__ == "__main__":
    if VALGRIND is None and "--instructions" in sys.argv:
        raise SystemExit("--instructions needs valgrind")
    main()
