"""Provides the pager a table on a terminal goes through, as git's does."""

from __future__ import annotations

import errno
import os
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING

from mnemo_tui import sanitize
from mnemo_tui.cli import terminal
from mnemo_tui.cli.output import hint

if TYPE_CHECKING:
    from collections.abc import Iterator


class _ToPager:
    """The pager's stdin as stdout: a terminal to the table writer (width and colour are the terminal's).

    Paced (`paced`): the pipe holds one page and each line is written only once it is empty, so the
    pager holds nothing it has not shown (less reads as it shows), and `flush` returns only once the
    pager has taken everything: a quit before the end is a broken pipe at any size, not only past the
    pipe's buffer. Unpaced (the pipe could not be shrunk) it is a plain pipe.
    """

    def __init__(self, fd: int, *, paced: bool) -> None:
        import select

        self.fd = fd
        self.paced = paced
        self.poller = select.poll()
        self.poller.register(fd, select.POLLOUT)
        self._empty = select.POLLOUT  # a one-page pipe is writable only when empty (a reader gone or not)
        self._gone = select.POLLERR | select.POLLHUP | select.POLLNVAL

    def write(self, data: str) -> int:
        raw = data.encode("utf-8")
        for piece in raw.splitlines(keepends=True) if self.paced else [raw]:
            self._drained()
            view = memoryview(piece)
            while view:
                view = view[os.write(self.fd, view) :]
        return len(data)

    def _drained(self) -> None:
        """Wait until the pager has read all that was written (a blocking wait on the pipe, no timer).

        Raises:
            BrokenPipeError: the pager exited before reading all of it.
        """
        if not self.paced:
            return
        while True:
            for _fd, mask in self.poller.poll():
                if mask & self._empty:
                    return
                if mask & self._gone:
                    raise BrokenPipeError(errno.EPIPE, "the pager exited before reading everything")

    def flush(self) -> None:
        self._drained()

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return sys.__stdout__.fileno() if sys.__stdout__ is not None else 1


def _one_page_pipe() -> tuple[int, int, bool]:
    """A pipe for the pager, and whether it holds one page only (Linux's `F_SETPIPE_SZ`), so it can be paced."""
    import fcntl

    read_end, write_end = os.pipe()
    try:
        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return read_end, write_end, False
    return read_end, write_end, True


@contextmanager
def paged(fmt: str, *, no_pager: bool, configured: str | None) -> Iterator[None]:
    """Send a table written to a terminal through a pager, as git does; nothing else is paged.

    The pager is `MNEMO_PAGER`, else `pager` of config.toml, else `PAGER`, else `less -FRX` (which
    quits at once when the output fits the screen, and keeps colours). `--no-pager`, a pipe, a
    machine format or a pager of `cat` (or empty) write straight to stdout. Messages meant for
    stderr wait until the pager has closed, so they never land in the middle of the page. A
    pager quit early (`q`) reads as an output closed mid-way (`_ToPager`): a catch-up then moves no
    watermark, whatever its size.
    """
    if fmt != "table" or no_pager or not terminal.is_tty(sys.stdout):
        yield
        return
    from mnemo_tui.files import pager_command, pager_missing

    command = pager_command(configured)
    if command in ("", "cat"):
        yield
        return
    if pager_missing(command):
        hint(f"mnemo: the pager {sanitize.quoted(command)} could not be started (not found); printing without it")
        yield
        return
    import subprocess

    env = dict(os.environ)
    env.setdefault("LESS", "FRX")
    env.setdefault("LV", "-c")
    read_end, write_end, paced = _one_page_pipe()
    pager: subprocess.Popen[bytes] | None = None
    try:
        pager = subprocess.Popen(command, shell=True, stdin=read_end, env=env)
    except OSError:
        pass
    finally:
        os.close(read_end)  # the pager's alone: once it exits, a write is a broken pipe
    if pager is None:
        os.close(write_end)
        yield
        return
    import io

    real_out, real_err = sys.stdout, sys.stderr
    held = io.StringIO()
    sys.stdout, sys.stderr = _ToPager(write_end, paced=paced), held
    try:
        yield
    finally:
        sys.stdout, sys.stderr = real_out, real_err
        os.close(write_end)
        while True:
            try:
                pager.wait()
                break
            except KeyboardInterrupt:  # ^C belongs to the pager (less ignores it) until it exits
                continue
        real_err.write(held.getvalue())
        real_err.flush()
