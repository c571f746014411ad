"""A real `mnemo serve` subprocess on a free loopback port, for tests that need the process itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support.cli import MNEMO
from tests.support.reliability import READY


@dataclass
class ServeProcess:
    proc: subprocess.Popen[str]
    url: str
    lines: list[str] = field(default_factory=list)

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=20)
        return code, "".join(self.lines)


def start_serve(
    home: Path, *args: str, port: int = 0, store: Path | None = None, program: tuple[str, ...] = (MNEMO,)
) -> ServeProcess:
    """`mnemo serve` on `port` (0: a free one) of 127.0.0.1, serving `store` (else MNEMO_HOME's) or what `args`
    say; `program`: what runs the `mnemo` command line (the installed script)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env["MNEMO_HOME"] = str(home)
    if store is not None:
        env["MNEMO_STORE"] = str(store)
    proc = subprocess.Popen(
        [*program, "serve", "--port", str(port), *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    found = threading.Event()
    url: list[str] = []

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            match = READY.search(line)
            if match and not found.is_set():
                url.append(match.group(1))
                found.set()
        found.set()

    threading.Thread(target=pump, daemon=True).start()
    if not found.wait(timeout=30) or not url:
        proc.kill()
        raise AssertionError("mnemo serve did not start: " + "".join(lines))
    served = ServeProcess(proc, url[0], lines)
    for _ in range(200):  # the socket is bound before the ready line; wait until it answers
        try:
            if httpx.get(served.url + "/health", timeout=2).status_code == 200:
                return served
        except httpx.TransportError:
            threading.Event().wait(0.05)
    proc.kill()
    raise AssertionError("mnemo serve never answered /health")


@contextmanager
def servers_over_database(url: str, homes: Path, count: int) -> Iterator[tuple[str, list[ServeProcess]]]:
    """`count` `mnemo serve` processes (4 workers each, MNEMO_HOME `homes/server<i>`) over the one PostgreSQL
    database at `url`, for the block: an API key of principal `team` made there, and the servers."""
    from mnemo_tui.engine.postgres.store import PgStore

    admin = PgStore(url)
    try:
        key = admin.create_key("team")[1]
    finally:
        admin.close()
    servers: list[ServeProcess] = []
    try:
        for i in range(count):
            home = homes / f"server{i}"
            home.mkdir()
            servers.append(start_serve(home, "--database", url, "--workers", "4"))
        yield key, servers
    finally:
        for server in servers:
            if server.proc.poll() is None:
                server.stop()


def start_writers(
    script: str, servers: list[ServeProcess], key: str, writers: int, writes: int
) -> list[subprocess.Popen[str]]:
    """`writers` processes running the Python `script` with the arguments `URL KEY w<i> WRITES`, the i-th on
    `servers[i % len(servers)]`; stdout and stderr piped."""
    return [
        subprocess.Popen(
            [sys.executable, "-c", script, servers[i % len(servers)].url, key, f"w{i}", str(writes)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(writers)
    ]
