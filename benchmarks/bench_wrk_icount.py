"""Provides the instructions (and CPU) a request of `bench_wrk.py`'s mix costs `mnemo serve` and its bare ASGI anchor.

    python benchmarks/bench_wrk_icount.py [--only mnemo|bare] [--cpu] [--profile FILE] [--entries 2000]

What a loaded machine does not move: each server (`mnemo serve` as a user starts it, and `bench_wrk.py`'s
bare app, each on its own copy of the same seeded store) runs under callgrind (`PYTHONHASHSEED=0`), driven
from this process, outside valgrind, by the `wrk_mix.lua` mix (40% writes of 20 to 400 characters, 60%
pages of 50, half of them following the last cursor seen) over 16 keep-alive connections all in flight.
The counters are zeroed after a warm-up of 50 requests, dumped after 50 more and again after 400 more;
the second dump over its 400 requests is the figure (every thread of the server counted).

`--cpu` runs the same phases without valgrind (4,000 requests measured) and reads the server's CPU a
request (user and system, every thread, from `/proc`), and its context switches. `--cache-sim` adds
callgrind's simulated cache misses and mispredicted branches a request (what costs time beside instructions). `--keep DIR` keeps the
stores, the logs and callgrind's dumps (`callgrind_annotate DIR/cg-mnemo/cg.PID.2`). `--profile FILE`
runs each server under cProfile instead, over the measured requests only, and writes the stats to FILE
with the server's name as its suffix (`python -m pstats FILE.mnemo`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_wrk  # noqa: E402
from _servers import MNEMO, free_port  # noqa: E402

VALGRIND = shutil.which("valgrind")
CALLGRIND_CONTROL = shutil.which("callgrind_control")
CONNECTIONS = 16
WARM, FIRST, SECOND = 50, 50, 400  # requests: before the counters are zeroed, to the first dump, to the second
CPU_REQUESTS = 4_000

# `mnemo serve` under cProfile, switched on by SIGUSR1 and written out by SIGUSR2 (signal handlers run on
# the main thread, the event loop's, between two bytecodes).
_PROFILED = r"""
import cProfile, signal, sys
profile, path = cProfile.Profile(), sys.argv[1]
signal.signal(signal.SIGUSR1, lambda *_: profile.enable())
def written(*_):
    profile.disable()
    profile.dump_stats(path)
signal.signal(signal.SIGUSR2, written)
if len(sys.argv) > 2:  # the bare app: its source, then its own arguments
    source, sys.argv = sys.argv[2], sys.argv[2:]
    exec(compile(source, "bare", "exec"))
else:
    sys.argv = ["mnemo", "serve", "--port", "0"]
    from mnemo_tui.cli import run
    run()
"""


class Mix:
    """The requests of `wrk_mix.lua`, made the same way from a seeded generator, and the last cursor seen."""

    def __init__(self, key: str, port: int) -> None:
        self.rng = random.Random(7)
        self.head = f"Host: 127.0.0.1:{port}\r\nX-Api-Key: {key}\r\nContent-Type: application/json\r\n"
        self.cursor: str | None = None
        self.n = 0
        self.statuses: dict[int, int] = {}

    def request(self) -> bytes:
        self.n += 1
        if self.rng.random() < 0.4:
            text = f"wrk write {self.n} " + "x" * self.rng.randint(20, 400)
            path, body = "/api/v1/memory/write", json.dumps({"content": text, "domain": "w"})
        else:
            page: dict[str, Any] = {"limit": 50}
            if self.cursor is not None and self.rng.random() < 0.5:
                page["cursor"] = self.cursor
            path, body = "/api/v1/memory/recent", json.dumps(page)
        data = body.encode()
        return f"POST {path} HTTP/1.1\r\n{self.head}Content-Length: {len(data)}\r\n\r\n".encode() + data

    def answered(self, head: bytes, body: bytes) -> None:
        status = int(head.split(None, 2)[1])
        self.statuses[status] = self.statuses.get(status, 0) + 1
        found = re.search(rb'"next_cursor":"([^"]+)"', body)
        if found:
            self.cursor = found.group(1).decode()
        elif b'"next_cursor":null' in body:
            self.cursor = None


async def body(reader: asyncio.StreamReader, head: bytes) -> bytes:
    """An answer's body: by its `Content-Length`, or its chunks (the bare app sends no length)."""
    length = re.search(rb"(?i)content-length: *(\d+)", head)
    if length is not None:
        return await reader.readexactly(int(length.group(1)))
    chunks = []
    while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)
    await reader.readexactly(2)
    return b"".join(chunks)


async def burst(mix: Mix, port: int, count: int) -> None:
    """`count` requests of the mix over `CONNECTIONS` keep-alive connections, each with one in flight."""
    left = count

    async def connection() -> None:
        nonlocal left
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while left > 0:
                left -= 1
                writer.write(mix.request())
                head = await reader.readuntil(b"\r\n\r\n")
                mix.answered(head, await body(reader, head))
        finally:
            writer.close()

    await asyncio.gather(*(connection() for _ in range(CONNECTIONS)))


def cpu_ticks(pid: int) -> tuple[int, int]:
    """User and system clock ticks every thread of `pid` has run so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def switches(pid: int) -> int:
    """Context switches, voluntary and not, of every thread of `pid` so far."""
    total = 0
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue  # a thread that ended meanwhile
        total += sum(int(n) for n in re.findall(r"ctxt_switches:\s+(\d+)", text))
    return total


def start(
    kind: str, store: Path, home: Path, prefix: list[str], profile: Path | None
) -> tuple[subprocess.Popen[bytes], int]:
    """The server of `kind` (`mnemo` or `bare`) over `store`, under `prefix` (valgrind or nothing); its port."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update(PYTHONHASHSEED="0", MNEMO_HOME=str(home), MNEMO_STORE=str(store))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed server has its byte code
    log_path = home / f"{kind}.log"
    port = free_port()
    if profile is not None:
        cmd = [sys.executable, "-c", _PROFILED, str(profile)]
        cmd += [bench_wrk._BARE, str(store), str(port)] if kind == "bare" else []
    elif kind == "bare":
        cmd = [*prefix, sys.executable, "-c", bench_wrk._BARE, str(store), str(port)]
    else:
        cmd = [*prefix, sys.executable, MNEMO, "serve", "--port", "0"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=env, cwd=home)
    for _ in range(3_000):  # bounded: 5 minutes (valgrind starts Python slowly)
        if proc.poll() is not None:
            raise RuntimeError(f"the {kind} server exited: " + log_path.read_text(errors="replace")[-3000:])
        if kind == "bare":
            try:
                with __import__("socket").create_connection(("127.0.0.1", port), timeout=1):
                    return proc, port
            except OSError:
                pass
        else:
            found = re.search(r"ready at http://127\.0\.0\.1:(\d+)/api/v1", log_path.read_text(errors="replace"))
            if found:
                return proc, int(found.group(1))
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"the {kind} server did not start")


def _totals(path: Path) -> dict[str, int]:
    """A dump's totals by event (`Ir`, the instructions, and with `--cache-sim` the misses and branches)."""
    lines = path.read_text(errors="replace").splitlines()
    events = next(line.split()[1:] for line in lines if line.startswith("events:"))
    for line in lines:
        if line.startswith(("summary:", "totals:")):
            return dict(zip(events, map(int, line.split()[1:]), strict=True))
    raise RuntimeError(f"no total in {path}")


def measure(
    kind: str, store: Path, key: str, home: Path, mode: str, profile: Path | None = None, caches: bool = False
) -> dict[str, float]:
    """One server measured: `mode` `instructions` (callgrind; with `caches`, its cache and branch simulation too),
    `cpu` (no valgrind) or `profile` (cProfile)."""
    out = home / f"cg-{kind}"
    out.mkdir()
    prefix: list[str] = []
    if mode == "instructions":
        assert VALGRIND is not None
        prefix = [
            VALGRIND,
            "--tool=callgrind",
            "--dump-instr=no",
            "--collect-jumps=no",
            f"--callgrind-out-file={out}/cg.%p",
        ]
        prefix[2:2] = ["--cache-sim=yes", "--branch-sim=yes"] if caches else []
    proc, port = start(kind, store, home, prefix, profile if mode == "profile" else None)
    mix = Mix(key, port)
    got: dict[str, float] = {}
    try:
        asyncio.run(burst(mix, port, WARM))
        if mode == "instructions":
            assert CALLGRIND_CONTROL is not None
            subprocess.run([CALLGRIND_CONTROL, "--zero", str(proc.pid)], check=True, capture_output=True)
            asyncio.run(burst(mix, port, FIRST))
            subprocess.run([CALLGRIND_CONTROL, "--dump=first", str(proc.pid)], check=True, capture_output=True)
            asyncio.run(burst(mix, port, SECOND))
            subprocess.run([CALLGRIND_CONTROL, "--dump=second", str(proc.pid)], check=True, capture_output=True)
            dumps = sorted(out.glob("cg.*.*"), key=lambda p: int(p.name.rsplit(".", 1)[1]))
            got["first"] = _totals(dumps[0])["Ir"] / FIRST
            for event, count in _totals(dumps[1]).items():
                got["instructions" if event == "Ir" else event] = count / SECOND
        elif mode == "profile":
            os.kill(proc.pid, signal.SIGUSR1)
            time.sleep(0.5)
            asyncio.run(burst(mix, port, CPU_REQUESTS))
            os.kill(proc.pid, signal.SIGUSR2)
            time.sleep(2)
        else:
            asyncio.run(burst(mix, port, FIRST))
            user, system = cpu_ticks(proc.pid)
            moved = switches(proc.pid)
            asyncio.run(burst(mix, port, CPU_REQUESTS))
            user2, system2 = cpu_ticks(proc.pid)
            tick = 1e6 / os.sysconf("SC_CLK_TCK")
            got["user_us"] = (user2 - user) * tick / CPU_REQUESTS
            got["system_us"] = (system2 - system) * tick / CPU_REQUESTS
            got["cpu_us"] = got["user_us"] + got["system_us"]
            got["switches"] = (switches(proc.pid) - moved) / CPU_REQUESTS
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
    refused = {status: n for status, n in mix.statuses.items() if status >= 400}
    if refused:
        raise RuntimeError(f"the {kind} server refused requests: {refused}")
    return got


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", choices=("mnemo", "bare"), default=None)
    parser.add_argument("--cpu", action="store_true", help="CPU a request without valgrind, instead of instructions")
    parser.add_argument("--profile", type=Path, default=None, help="cProfile stats of mnemo serve, written here")
    parser.add_argument("--entries", type=int, default=2_000)
    parser.add_argument("--cache-sim", action="store_true", help="callgrind's cache and branch simulation too")
    parser.add_argument("--keep", type=Path, default=None, help="an empty folder to keep the stores, logs and dumps in")
    args = parser.parse_args(argv)
    mode = "profile" if args.profile else "cpu" if args.cpu else "instructions"
    if mode == "instructions" and (VALGRIND is None or CALLGRIND_CONTROL is None):
        print("not measured: valgrind is not installed")
        return 0
    kinds = [args.only] if args.only else ["mnemo", "bare"]
    result: dict[str, Any] = {"mode": mode, "entries": args.entries}
    with tempfile.TemporaryDirectory(prefix="mnemo-icount-") as tmp:
        home = Path(tmp) if args.keep is None else args.keep.resolve()
        home.mkdir(parents=True, exist_ok=True)
        key = bench_wrk.seed(home / "seed.db", args.entries)
        for kind in kinds:
            store = home / f"{kind}.db"
            shutil.copyfile(home / "seed.db", store)
            profile = args.profile.resolve().with_suffix(f".{kind}") if args.profile else None
            result[kind] = {
                k: round(v, 1) for k, v in measure(kind, store, key, home, mode, profile, args.cache_sim).items()
            }
    figure = "instructions" if mode == "instructions" else "cpu_us"
    if figure in result.get("mnemo", {}) and figure in result.get("bare", {}):
        result["ratio"] = round(result["mnemo"][figure] / result["bare"][figure], 3)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
