"""The progress line on a terminal's stderr counts what was delivered, as it is delivered, and is true when stopped."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import signal
import subprocess
import termios
import threading
from pathlib import Path

import pytest

from mnemo_tui.cli.progress import Progress
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.writes import WriteRequest
from tests.support.cli import MNEMO

pytestmark = pytest.mark.timeout(120)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_each_count_is_shown_once_the_interval_has_passed_and_settle_shows_the_last() -> None:
    now = [0.0]
    stream = _Terminal()
    progress = Progress("new", stream=stream, clock=lambda: now[0])
    progress.update(1)  # the first page: at once
    progress.update(591)  # within the interval: held back
    assert stream.getvalue() == "\r1 new so far…"
    progress.settle()  # a walk stopped here: the line says what was delivered
    assert stream.getvalue().endswith("\r591 new so far…")
    now[0] += Progress.INTERVAL
    progress.update(700)  # not a thousand later: the next interval
    assert stream.getvalue().endswith("\r700 new so far…")
    progress.done()
    assert stream.getvalue().endswith("\r\x1b[K")


def test_a_catchup_interrupted_mid_walk_leaves_the_count_it_delivered(isolated_home: Path) -> None:
    store = Store(isolated_home / "store.db")
    store.bulk_insert([("local", WriteRequest(f"entry {i} " + "x" * 200), i + 1) for i in range(3000)])
    store.close()
    # Its own pty, not tests.support.cli.on_terminal: stdout is held unread to stop the pass mid-walk, then ^C.
    master, slave = pty.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.OPOST
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update(MNEMO_HOME=str(isolated_home), NO_COLOR="1")
    # stdout a pipe the test does not read yet: the pass blocks once it is full, part-way through the walk.
    proc = subprocess.Popen(
        [MNEMO, "catchup", "--limit", "10", "--format", "ndjson"],
        stdout=subprocess.PIPE,
        stderr=slave,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    os.close(slave)
    err = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            err.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    assert proc.stdout is not None
    waiting = threading.Event()
    for _ in range(2000):  # until the pipe holds half its 64 KiB (bounded): many pages after the first
        held = fcntl.ioctl(proc.stdout.fileno(), termios.FIONREAD, b"\0\0\0\0")
        if int.from_bytes(held, "little") >= 32768 or proc.poll() is not None:
            break
        waiting.wait(0.01)
    assert proc.poll() is None, "the pass ended before its output filled the pipe"
    proc.send_signal(signal.SIGINT)
    out = proc.stdout.read()
    assert proc.wait(timeout=60) == 130
    reader.join(30)
    os.close(master)
    lines = out.count(b"\n")  # whole lines: the page being written when ^C came may be cut
    shown = re.findall(r"\r([\d,]+) new so far…", err.decode())
    assert shown, err
    last = int(shown[-1].replace(",", ""))
    # A page counts once flushed: the count trails the whole lines by less than a page (one being written when
    # ^C came), or by exactly one page when ^C fell between a flush and its count.
    assert last % 10 == 0 and lines - 10 <= last <= lines, (last, lines, err.decode())
    assert "interrupted; nothing half-committed" in err.decode()
