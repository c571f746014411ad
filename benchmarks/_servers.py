"""Provides what several benchmarks start alike: `mnemo serve` on a free loopback port as a user starts it, and a
free port for an anchor's server.

Kept apart so that no benchmark module imports another for it (`bench_wrk` and `bench_load` imported each
other for these).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

MNEMO = shutil.which("mnemo", path=str(Path(sys.executable).parent)) or "mnemo"


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_ns(pid: int | None) -> int:
    """CPU time (ns) every thread of process `pid` has run so far (Linux's per-thread schedstat); 0 without one."""
    total = 0
    if pid is not None:
        for task in Path(f"/proc/{pid}/task").glob("*/schedstat"):
            try:
                total += int(task.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                pass  # a thread that ended meanwhile
    return total


def start_serve(store: Path, home: Path, prefix: Sequence[str] = ()) -> tuple[subprocess.Popen[bytes], str]:
    """`mnemo serve --port 0` over `store` as a user starts it (access log on, to `home/serve.log`), run under
    `prefix` (a `taskset` that pins it, or nothing); returns it and its `/api/v1` address once `/health` answers."""
    import httpx

    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update(MNEMO_HOME=str(home), MNEMO_STORE=str(store))
    log_path = home / "serve.log"
    with open(log_path, "wb") as log:
        command = [*prefix, MNEMO, "serve", "--port", "0"]
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, env=env)
    for _ in range(600):  # bounded: 30 s
        found = re.search(r"ready at (http://\S+/api/v1)", log_path.read_text(errors="replace"))
        if found:
            for _ in range(200):
                try:
                    if httpx.get(found.group(1) + "/health", timeout=2).status_code == 200:
                        return proc, found.group(1)
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
            break
        if proc.poll() is not None:
            raise RuntimeError("mnemo serve exited: " + log_path.read_text(errors="replace"))
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("mnemo serve did not start")
