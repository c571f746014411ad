"""The installed `mnemo` console script in a subprocess: its path, what a run gave back, and a run on a terminal."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

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
