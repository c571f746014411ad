"""The installed `mnemo` console script in a subprocess: its path, what a run gave back, runs on a terminal
(`on_terminal`: the streams named on one pseudo-terminal, typed answers; `in_terminal`: all three, exit 0),
a recording pager, a filled store, the rooms listed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.writes import WriteRequest

MNEMO = shutil.which("mnemo", path=str(Path(sys.executable).parent)) or "mnemo"


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


def terminal_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment for a run on a terminal: no MNEMO_*, NO_COLOR or COLUMNS of the caller's,
    MNEMO_HOME `home`, then `extra`."""
    drop = ("NO_COLOR", "COLUMNS")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_") and k not in drop}
    return {**env, "MNEMO_HOME": str(home), **extra}


STREAMS = ("stdin", "stdout", "stderr")


def on_terminal(
    argv: list[str],
    *,
    env: dict[str, str],
    columns: int = 100,
    rows: int = 40,
    terminal: tuple[str, ...] = ("stdout",),
    input: str | None = None,
    turns: list[tuple[str, str]] | None = None,
    until: Callable[[str], bool] | None = None,
    new_session: bool = False,
    timeout: float = 60,
) -> CliResult:
    """Run `argv` with the streams named in `terminal` on one pseudo-terminal `columns` x `rows`, the others piped.

    The code and each output stream: one on the terminal holds all the terminal showed (stdout and
    stderr on it hold the same text). `input` is typed on the terminal when stdin is on it, else piped;
    each of `turns` (prompt, answer), removed from the list as it goes, is typed once its prompt is shown.
    The run ends when every stream is closed, or once `until(shown)`; a process still running then
    gets SIGINT (its whole group under `new_session`). Bounded by `timeout`. The terminal writes bytes
    as given (no "\n" made "\r\n"). What a person's terminal lays out (widths, the header, short ids)
    is tested here; a pipe gets the tab-separated rows instead (docs/cli.md, Output).
    """
    import fcntl
    import pty
    import selectors
    import signal
    import struct
    import termios

    assert set(terminal) <= set(STREAMS), terminal
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    # The terminal's own line discipline would turn each "\n" into "\r\n": keep the bytes as written.
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.OPOST
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    full = {k: v for k, v in env.items() if k != "COLUMNS"}
    ends = {name: slave if name in terminal else subprocess.PIPE for name in STREAMS}
    proc = subprocess.Popen(argv, **ends, env=full, close_fds=True, start_new_session=new_session)  # type: ignore[call-overload]
    os.close(slave)
    if proc.stdin is not None:  # written by a thread: a large input must not wait on the output being read
        piped, proc.stdin = proc.stdin, None
        threading.Thread(target=_feed, args=(piped, (input or "").encode()), daemon=True).start()
    elif input:
        os.write(master, input.encode())
    pending = turns if turns is not None else []
    sources = {master: "terminal"}
    for name, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr)):
        if pipe is not None:
            sources[pipe.fileno()] = name
    got = {"terminal": b"", "stdout": b"", "stderr": b""}
    deadline = time.monotonic() + timeout
    try:
        with selectors.DefaultSelector() as ready:
            for fd in sources:
                ready.register(fd, selectors.EVENT_READ)
            while sources:
                # Every end read as it comes: one read to its end first would leave the other full (the child blocked).
                events = ready.select(timeout=0.1)
                for key, _mask in events:
                    try:
                        chunk = os.read(key.fd, 65536)
                    except OSError:  # EIO: every process on the terminal has closed it
                        chunk = b""
                    if chunk:
                        got[sources[key.fd]] += chunk
                    else:
                        ready.unregister(key.fd)
                        del sources[key.fd]
                shown = got["terminal"].decode(errors="replace")
                if pending and pending[0][0] in shown:
                    os.write(master, pending.pop(0)[1].encode())
                if until is not None and until(shown):
                    break
                if not events and proc.poll() is not None:
                    break  # ended with nothing left to read: what is still open, a process it left holds
                if time.monotonic() > deadline:
                    raise AssertionError(f"{argv} never ended: {shown[-2000:]}")
    finally:
        if proc.poll() is None:
            if new_session:
                os.killpg(proc.pid, signal.SIGINT)
            else:
                proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        os.close(master)
    out = {name: got["terminal" if name in terminal else name].decode(errors="replace") for name in STREAMS[1:]}
    return CliResult(proc.returncode, out["stdout"], out["stderr"])


def _feed(pipe: IO[bytes], data: bytes) -> None:
    try:
        pipe.write(data)
        pipe.close()
    except BrokenPipeError:  # the process ended without reading all of it
        pass


def in_terminal(
    home: Path,
    args: list[str],
    *,
    env: dict[str, str] | None = None,
    columns: int = 100,
    typed: str = "",
    turns: list[tuple[str, str]] | None = None,
) -> str:
    """Run mnemo with stdin, stdout and stderr on one pseudo-terminal and exit 0; returns all it showed (bounded).

    `typed` is typed at once; each of `turns` (prompt, answer) is typed once its prompt is shown (a hidden
    prompt drops what was typed ahead of it).
    """
    full = terminal_env(home, NO_COLOR="1", TERM="xterm", **(env or {}))
    shown = on_terminal(
        [MNEMO, *args], env=full, columns=columns, terminal=STREAMS, input=typed, turns=list(turns or [])
    )
    assert shown.code == 0, shown.stdout
    return shown.stdout.replace("\r\n", "\n")


ROOM_RE = r"xroom:room_[0-9A-Z]{26}"


def listed_rooms(cli: Callable[..., CliResult]) -> list[dict[str, Any]]:
    """The rooms `mnemo rooms list` shows, through `cli` (or `run_cli`)."""
    listed = json.loads(cli("rooms", "list", "--format", "json").stdout)
    assert isinstance(listed, list)
    return listed


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
