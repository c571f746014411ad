"""Provides the CLI's renderers: NDJSON and JSON written from wire text, and the `table` a person reads."""

from __future__ import annotations

import errno
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from mnemo_tui import sanitize, timefmt
from mnemo_tui.errors import ValidationError
from mnemo_tui.limits import dumps as _dumps
from mnemo_tui.values.model import EmptyReport, Entry

if TYPE_CHECKING:
    from typing import IO, Any

    from mnemo_tui.values.removals import Removal

FORMATS = ("table", "json", "ndjson")
FALLBACK_WIDTH = 120
MAX_WIDTH = 10_000  # wider than any screen: a table is never laid out past it
# JSON outputs are spelled as the store keeps them (the one `limits.dumps`).
dumps = _dumps


def check_format(value: str, *, allow_ndjson: bool = True) -> str:
    """Validate `--format`; `ndjson` only where the output is a list of entries.

    Raises:
        ValidationError: any other value.
    """
    allowed = FORMATS if allow_ndjson else ("table", "json")
    if value not in allowed:
        raise ValidationError(f"--format must be one of {', '.join(allowed)}, got {value!r}")
    if value != "table":
        # Machine formats are UTF-8 bytes whatever the locale says (a cp1252 console included).
        reconfigure = getattr(sys.stdout, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(encoding="utf-8", errors="strict")
    if value == "json" and is_tty(sys.stdout) and not isinstance(sys.stdout, _PrettyJson):
        sys.stdout = _PrettyJson(sys.stdout)
    if value == "ndjson" and is_tty(sys.stdout) and not isinstance(sys.stdout, _NdjsonForTerminal):
        sys.stdout = _NdjsonForTerminal(sys.stdout)
    return value


class _PrettyJson:
    """Holds a JSON document meant for a person's terminal, to print it indented (`finish_stdout`).

    A pipe gets the compact document, exact. On a terminal the same document is indented, and the
    characters a terminal would act on (C1 controls, bidi marks, line separators) stay escaped.
    """

    def __init__(self, real: IO[str]) -> None:
        self.real = real
        self.parts: list[str] = []

    def write(self, data: str) -> int:
        self.parts.append(data)
        return len(data)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.real.fileno()

    def finish(self) -> None:
        import json

        for line in "".join(self.parts).splitlines():
            try:
                pretty = json.dumps(json.loads(line), indent=2, ensure_ascii=False)
            except ValueError:
                pretty = line
            self.real.write(json_for_terminal(pretty) + "\n")
        self.real.flush()


class _NdjsonForTerminal:
    """NDJSON meant for a person's terminal: each line as written, with what a terminal would act on escaped
    (`json_for_terminal`: the same JSON values), as `json` and `export` are; a pipe gets the stored bytes."""

    def __init__(self, real: IO[str]) -> None:
        self.real = real

    def write(self, data: str) -> int:
        self.real.write(json_for_terminal(data))
        return len(data)

    def flush(self) -> None:
        self.real.flush()

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.real.fileno()


def json_for_terminal(text: str) -> str:
    """JSON text with the characters a terminal would act on (C1 controls, bidi marks, line separators)
    escaped: they can only stand inside JSON strings, so the value is unchanged."""
    import re

    unsafe = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
    return unsafe.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def finish_stdout() -> None:
    """Write what a terminal's JSON document held (see `_PrettyJson`); nothing otherwise."""
    held = sys.stdout
    if isinstance(held, _PrettyJson):
        sys.stdout = held.real
        held.finish()


def document_or_line(fmt: str, document: Any, line: str) -> None:
    """What a command that makes one thing prints: the JSON document, or in a table the one line scripts read
    (an id or a code an endpoint sent: shown through the sanitizer, as every text a person reads)."""
    sys.stdout.write((dumps(document) if fmt == "json" else sanitize.line(line)) + "\n")


def ndjson(out: IO[str], wires: Iterable[str]) -> None:
    """One JSON item per line, written as stored."""
    text = "\n".join(wires)
    if text:
        out.write(text + "\n")


def shell_quote(text: str) -> str:
    """Quote a value for a shell command line a person can paste (only when it needs it)."""
    import shlex

    return shlex.quote(text)


def is_tty(stream: IO[str]) -> bool:
    """Whether a stream is a terminal (False for anything that cannot say)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def color_enabled(stream: IO[str]) -> bool:
    """Colour only on a terminal, never with `NO_COLOR` set (any value) or `TERM=dumb`."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return is_tty(stream)


def width_of(stream: IO[str]) -> int:
    """The width a terminal's table is laid out in: `COLUMNS`, else the terminal's, else 120.

    Only a terminal (or the pager) gets a laid-out table: a pipe gets whole values, never cut to a width.
    """
    import shutil

    # Bounded above too: a mistyped COLUMNS (20 digits) would pad each row past memory, or overflow.
    return min(MAX_WIDTH, max(40, shutil.get_terminal_size((FALLBACK_WIDTH, 24)).columns))


def silence_stdout() -> None:
    """Point stdout at /dev/null after the reader went away, so Python does not complain at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


class Progress:
    """A count on stderr while a long walk runs, only when stderr is a terminal (never in a pipe or a log).

    The count is what was delivered (each page once its output was flushed), shown as the pages are
    printed, at most every `INTERVAL` seconds of `clock`; `settle` shows the exact count when a walk
    stops before its end (Ctrl-C), so the line is never stale: it used to wait 1,000 items, so a
    first page of 1 left `1 new so far…` on screen while hundreds more went out.
    """

    INTERVAL = 0.1

    def __init__(
        self,
        noun: str,
        stream: IO[str] | None = None,
        total: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream or sys.stderr
        self.noun = noun
        self.total = total  # known: a bar, else a running count
        self.enabled = is_tty(self.stream)
        self.shown = False
        self.clock = clock
        self._count = 0  # the latest count given
        self._last = 0  # the count on screen
        self._at = 0.0  # when it was put there

    def expect(self, total: int) -> None:
        """The count the work will reach: a bar from now on."""
        self.total = total

    def update(self, count: int) -> None:
        """The count now: shown at once the first time, then at most every `INTERVAL` seconds."""
        if not self.enabled:
            return
        self._count = count
        now = self.clock()
        if self.shown and (count == self._last or now - self._at < self.INTERVAL):
            return
        self._at = now
        self._show(count)

    def settle(self) -> None:
        """Show the exact latest count (a walk stopped before its end leaves a true line on screen)."""
        if self.shown and self._count != self._last:
            self._show(self._count)

    def _show(self, count: int) -> None:
        self._last = count
        self.shown = True
        if self.total:
            done = min(count, self.total) / self.total
            bar = "#" * int(done * 30)
            self.stream.write(f"\r[{bar:<30}] {done:4.0%} {count:,}/{self.total:,} {self.noun}")
        else:
            self.stream.write(f"\r{count:,} {self.noun} so far…")
        self.stream.flush()

    def done(self) -> None:
        """Erase the count line."""
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


# The widest WHEN a row can show (`Nov 28 14:03`; `just now`, `59m ago` and `2025-11-28` are narrower).
WHEN_WIDTH = 12
ID_WIDTH = 8


class TableWriter:
    """Writes entries as aligned lines, page by page, so a long walk streams instead of buffering.

    Each line: when (the age while it says enough, else the date, on the local clock unless
    `utc`), author, domain, the first line of the content, and the start of the atom id. Widths
    are terminal cells (wide characters take two). Columns are sized to the first page and give
    way to the content on a narrow terminal; colour follows `NO_COLOR` and the terminal. A room's
    feed, or one domain's, has no domain column: the scope already says it. `wide` wraps each
    entry's whole content under its content column instead of clipping its first line.

    In a pipe (stdout no terminal, and no pager) the same columns carry whole values for grep, cut
    and awk, as gh does: no header, one tab-separated line per entry (time as ISO-8601 with its
    offset, author, domain, content, the whole atom id), no padding, no cut. Each value is one safe
    line (`sanitize.line`: a tab shows as `\\x09`, a newline as `⏎`), so a line is always one entry.
    """

    def __init__(
        self,
        out: IO[str] | None = None,
        now: int | None = None,
        scope: str | None = None,
        *,
        utc: bool = False,
        wide: bool = False,
        follow: bool = False,
    ) -> None:
        self.out = out or sys.stdout
        self.piped = not is_tty(self.out)
        self.color = color_enabled(self.out)
        self.width = width_of(self.out)
        self.now = timefmt.now_us() if now is None else now
        self.utc = utc
        self.wrap = wide
        # Rows that arrive later (`--follow`) must fit the widths the first page set: none are narrowed to it.
        self.follow = follow
        self.header_done = False
        self.count = 0
        self.when_w = WHEN_WIDTH
        self.author_w, self.domain_w = (18, 16) if self.width >= 80 else (12, 10)
        # A short id stays at any width: the domain gives way first (below 70 columns), then the author (50).
        self.show_domain = scope is None and self.width >= 70
        if self.width < 50:
            self.author_w = 0
        self._layout()

    def _layout(self) -> None:
        domain = self.domain_w + 2 if self.show_domain else 0
        author = self.author_w + 2 if self.author_w else 0
        self.indent = self.when_w + 2 + author + domain
        self.content_w = max(8, self.width - self.indent - (ID_WIDTH + 2))

    def _when(self, entry: Entry) -> str:
        if self.follow:
            # A follow's rows stay on screen while time passes, and later rows are younger than `self.now`:
            # an age would go stale, or be shown for some rows only. Every row gets its date and time.
            return timefmt.dated(entry.created_at, timefmt.now_us(), self.utc)
        return timefmt.when(entry.created_at, self.now, self.utc)

    def _fit(self, entries: list[Entry]) -> None:
        """Narrow the columns to what the first page needs, so the content gets the room."""
        if entries and not self.follow:
            header = "WHEN (UTC)" if self.utc else "WHEN"
            self.when_w = max(len(header), *(len(self._when(e)) for e in entries))
            if self.author_w:
                widest = max(len("AUTHOR"), *(sanitize.cells(sanitize.line(e.author)) for e in entries))
                self.author_w = min(self.author_w, widest)
            self.domain_w = min(
                self.domain_w, max(len("DOMAIN"), *(sanitize.cells(sanitize.line(e.domain)) for e in entries))
            )
            self._layout()

    def _style(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def header(self) -> None:
        """Write the column header once."""
        if not self.header_done:
            domain = f"{'DOMAIN':<{self.domain_w}}  " if self.show_domain else ""
            author = f"{'AUTHOR':<{self.author_w}}  " if self.author_w else ""
            when = "WHEN (UTC)" if self.utc else "WHEN"
            line = f"{when:<{self.when_w}}  {author}{domain}CONTENT"
            self.out.write(self._style(line, "1") + "\n")
            self.header_done = True

    def rows(self, entries: list[Entry]) -> None:
        """Write one line per entry (the first call also sizes the columns and writes the header)."""
        if self.piped:
            self.count += len(entries)
            self.out.write("".join(self._tab_separated(e) for e in entries))
            return
        if not self.header_done:
            self._fit(entries)
        self.header()
        room = self.content_w
        lines = []
        for entry in entries:
            self.count += 1
            when = sanitize.pad(self._when(entry), self.when_w)
            extra = " (superseded)" if entry.superseded_by else ""
            author = sanitize.pad(_clip(entry.author, self.author_w), self.author_w) + "  " if self.author_w else ""
            domain = sanitize.pad(_clip(entry.domain, self.domain_w), self.domain_w) + "  " if self.show_domain else ""
            lead = f"{self._style(when, '36')}  {self._style(author, '33')}{domain}"
            if self.wrap:
                parts = _wrapped(entry.content, max(1, room - len(extra))) or ["(blank)"]
                first = parts[0]
            else:
                parts = []
                first = _clip(entry.first_line or "(blank)", max(1, room - len(extra)))
            line = f"{lead}{first}{self._style(extra, '2')}"
            gap = max(2, room - sanitize.cells(first) - len(extra) + 2)
            line += " " * gap + self._style(entry.atom_id[:ID_WIDTH], "2")
            lines.append(line + "\n")
            lines.extend(" " * self.indent + part + "\n" for part in parts[1:])
        self.out.write("".join(lines))

    def _tab_separated(self, entry: Entry) -> str:
        values = (entry.author, entry.domain, entry.content)
        shown = "\t".join(sanitize.line(v) for v in values)
        return f"{timefmt.iso_offset(entry.created_at, self.utc)}\t{shown}\t{entry.atom_id}\n"

    def _removal_separated(self, item: Removal) -> str:
        values = ("", item.scope, f"removed ({item.reason})")
        shown = "\t".join(sanitize.line(v) for v in values)
        return f"{timefmt.iso_offset(item.removed_at, self.utc)}\t{shown}\t{item.atom_id}\n"

    def removed(self, removals: list[Removal]) -> None:
        """Write one row per removal (`catchup --changes`), marked `removed` and why, in the entries' columns.

        In a pipe each is a line of the entries' five tab-separated values (`_tab_separated`): when it
        was removed, an empty author (an entry's never is), its domain, `removed (<reason>)`, its whole id.
        """
        if self.piped:
            self.out.write("".join(self._removal_separated(item) for item in removals))
            return
        self.header()
        lines = []
        for item in removals:
            when = sanitize.pad(timefmt.when(item.removed_at, self.now, self.utc), self.when_w)
            author = " " * (self.author_w + 2) if self.author_w else ""
            domain = sanitize.pad(_clip(item.scope, self.domain_w), self.domain_w) + "  " if self.show_domain else ""
            mark = _clip_shown(f"removed ({item.reason})", self.content_w)
            gap = max(2, self.content_w - sanitize.cells(mark) + 2)
            lines.append(
                f"{self._style(when, '36')}  {author}{domain}{self._style(mark, '31')}{' ' * gap}"
                f"{self._style(item.atom_id[:ID_WIDTH], '2')}\n"
            )
        self.out.write("".join(lines))

    def report(self, report: EmptyReport) -> None:
        """Write an empty report (the result of an empty answer in table mode): its shown text."""
        self.out.write(report.shown + "\n")


def _wrapped(content: str, width: int) -> list[str]:
    """The whole content as safe lines of at most `width` cells: its own lines kept, each wrapped at spaces."""
    out: list[str] = []
    for raw in content.split("\n"):
        shown = " ".join(sanitize.line(raw).split())
        while sanitize.cells(shown) > width:
            cut = sanitize.clip(shown, width + 1)[:-1]  # the longest head that fits
            space = cut.rfind(" ")
            head = cut[:space] if space > 0 else cut
            out.append(head)
            shown = shown[len(head) :].lstrip()
        if shown or not out or out[-1]:
            out.append(shown)
    while out and not out[-1]:
        out.pop()
    return out


def _clip(value: str, width: int) -> str:
    """One cell of stored text: made safe for the terminal (mnemo_tui/sanitize.py), spaces collapsed, clipped with `…`."""
    return _clip_shown(sanitize.line(value), width)


def _clip_shown(shown: str, width: int) -> str:
    return sanitize.clip(" ".join(shown.split()), width)


def may_ask(yes: bool, command: str) -> None:
    """Refuse (exit 2) a destructive command that would ask first when it cannot: stdin or stderr is no terminal."""
    if not yes and not (is_tty(sys.stdin) and is_tty(sys.stderr)):
        raise ValidationError(f"{command} asks first, and stdin is not a terminal: add --yes to go ahead")


def confirmed(question: str) -> bool:
    """Ask `question [y/N]` on stderr and read the answer from stdin; only y or yes is a yes."""
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


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
    if fmt != "table" or no_pager or not is_tty(sys.stdout):
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


def hint(message: str) -> None:
    """A message for the person at the terminal: stderr, never stdout.

    The message is mnemo's own text; any stored or endpoint text in it was passed through
    `mnemo_tui.sanitize` where it was interpolated (the sanitizer is not idempotent: never twice).
    """
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def key_value_table(out: IO[str], rows: list[tuple[str, str]]) -> None:
    """Aligned `key  value` lines (status, one watermark); each value shown as one safe line."""
    rows = [(key, sanitize.line(value)) for key, value in rows]
    width = max((len(k) for k, _ in rows), default=0)
    color = color_enabled(out)
    for key, value in rows:
        label = key.ljust(width)
        out.write((f"\x1b[1m{label}\x1b[0m" if color else label) + f"  {value}\n")


def listed_time(us: int, utc: bool, *, age: bool = False) -> str:
    """A time in a list's table: for a person on a terminal (`2026-11-30 08:00:00 CET`, or the age with
    `age`), and in a pipe as an entry row's, ISO-8601 with its offset (`Z` in UTC): one way per output kind."""
    if not is_tty(sys.stdout):
        return timefmt.iso_offset(us, utc)
    return timefmt.relative(us) if age else timefmt.shown(us, utc)


def listing(
    fmt: str, document: Any, *, empty: str, headers: list[str], rows: list[list[str]], flex: int | None = None
) -> None:
    """What a command that lists things prints: the JSON document; or the grid, or what to do when it is empty."""
    out = sys.stdout
    if fmt == "json":
        out.write(dumps(document) + "\n")
    elif not rows:
        out.write(empty + "\n")
    else:
        grid(out, headers, rows, flex=flex)


def grid(out: IO[str], headers: list[str], rows: list[list[str]], *, flex: int | None = None) -> None:
    """A plain aligned grid (lists of rooms, secrets, keys, watermarks).

    Args:
        out: where to write.
        headers: the column titles.
        rows: the cells, one list per row.
        flex: the index of a free-text column clipped (with `…`) so each line fits a terminal's width.

    Every cell is shown as one safe line (mnemo_tui/sanitize.py): the cells hold stored text. In a pipe
    nothing is clipped (a script or grep gets whole values, as from the entry table).
    """
    rows = [[sanitize.line(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, sanitize.cells(c)) for w, c in zip(widths, row, strict=True)]
    if flex is not None and is_tty(out):
        others = sum(w for i, w in enumerate(widths) if i != flex) + 2 * (len(widths) - 1)
        room = max(len(headers[flex]), 10, width_of(out) - others)
        if widths[flex] > room:
            widths[flex] = room
            rows = [[_clip_shown(c, room) if i == flex else c for i, c in enumerate(row)] for row in rows]
    color = color_enabled(out)
    head = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    out.write((f"\x1b[1m{head}\x1b[0m" if color else head) + "\n")
    for row in rows:
        out.write("  ".join(sanitize.pad(c, w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")
