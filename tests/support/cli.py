"""The installed `mnemo` console script in a subprocess: its path, what a run gave back, runs on a terminal
(`on_terminal`: stdout on it; `in_terminal`: all three streams, typed answers), a recording pager, a filled store."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.writes import WriteRequest

MNEMO = shutil.which("mnemo", path=str(Path(sys.executable).parent)) or "mnemo"


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


def on_terminal(
    argv: list[str], *, columns: int, env: dict[str, str], input: str | None = None, timeout: float = 60
) -> CliResult:
    """Run `argv` with stdout on a pseudo-terminal `columns` wide (stdin and stderr piped, no pager).

    What a person's terminal lays out (widths, the header, short ids) is tested here; a pipe gets
    the tab-separated rows instead (docs/cli.md, Output).
    """
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    # The terminal's own line discipline would turn each "\n" into "\r\n": keep the bytes as written.
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.OPOST
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    full = {k: v for k, v in env.items() if k != "COLUMNS"}
    full.setdefault("MNEMO_PAGER", "cat")
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=slave, stderr=subprocess.PIPE, env=full, text=True, close_fds=True
    )
    os.close(slave)
    got = bytearray()
    reader = threading.Thread(target=_drain, args=(master, got), daemon=True)
    reader.start()
    try:
        _out, err = proc.communicate(input=input, timeout=timeout)
    finally:
        reader.join(timeout)
        os.close(master)
    return CliResult(proc.returncode, got.decode(errors="replace"), err)


def _drain(fd: int, into: bytearray) -> None:
    """Read a pseudo-terminal's master side until its slave side is closed by every process (EIO)."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        into.extend(chunk)


def in_terminal(
    home: Path,
    args: list[str],
    *,
    env: dict[str, str] | None = None,
    columns: int = 100,
    typed: str = "",
    turns: list[tuple[str, str]] | None = None,
) -> str:
    """Run mnemo with stdin, stdout and stderr on one pseudo-terminal; returns all it showed (bounded).

    `typed` is typed at once; each of `turns` (prompt, answer) is typed once its prompt is shown (a hidden
    prompt drops what was typed ahead of it).
    """
    pending = list(turns or [])
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    full = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_") and k not in ("NO_COLOR", "COLUMNS")}
    full.update({"MNEMO_HOME": str(home), "NO_COLOR": "1", "TERM": "xterm", **(env or {})})
    proc = subprocess.Popen([MNEMO, *args], stdin=slave, stdout=slave, stderr=slave, env=full, close_fds=True)
    os.close(slave)
    if typed:
        os.write(master, typed.encode())
    got = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            got += chunk
            if pending and pending[0][0].encode() in got:
                os.write(master, pending.pop(0)[1].encode())
        elif proc.poll() is not None:
            break
    os.close(master)
    assert proc.wait(timeout=30) == 0, got.decode(errors="replace")
    return got.decode(errors="replace").replace("\r\n", "\n")


def recorder(tmp_path: Path, name: str) -> tuple[str, Path]:
    """A pager (or editor) that records what it was given into a file."""
    seen = tmp_path / f"{name}.seen"
    script = tmp_path / f"{name}.sh"
    script.write_text(f'#!/bin/sh\ncat > "{seen}"\n')
    script.chmod(0o755)
    return str(script), seen


def fill(home: Path, count: int, **request: Any) -> list[str]:
    store = Store(home / "store.db")
    try:
        return [store.write("local", WriteRequest(f"entry {i}", **request)).atom_id for i in range(count)]
    finally:
        store.close()
