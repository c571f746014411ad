"""Provides the tables a person reads: the streaming entry table (`TableWriter`), and the plain grids of lists.

The entry table is written page by page, never laid out whole (rich's `Table` measures every row
before it prints one), so `recent --all` and `catchup` stream in flat memory.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from mnemo_tui import sanitize, timefmt
from mnemo_tui.cli import terminal

if TYPE_CHECKING:
    from typing import IO

    from mnemo_tui.values.model import EmptyReport, Entry
    from mnemo_tui.values.removals import Removal

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
        self.piped = not terminal.is_tty(self.out)
        self.color = terminal.color_enabled(self.out)
        self.width = terminal.width_of(self.out)
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


def key_value_table(out: IO[str], rows: list[tuple[str, str]]) -> None:
    """Aligned `key  value` lines (status, one watermark); each value shown as one safe line."""
    rows = [(key, sanitize.line(value)) for key, value in rows]
    width = max((len(k) for k, _ in rows), default=0)
    color = terminal.color_enabled(out)
    for key, value in rows:
        label = key.ljust(width)
        out.write((f"\x1b[1m{label}\x1b[0m" if color else label) + f"  {value}\n")


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
    if flex is not None and terminal.is_tty(out):
        others = sum(w for i, w in enumerate(widths) if i != flex) + 2 * (len(widths) - 1)
        room = max(len(headers[flex]), 10, terminal.width_of(out) - others)
        if widths[flex] > room:
            widths[flex] = room
            rows = [[_clip_shown(c, room) if i == flex else c for i, c in enumerate(row)] for row in rows]
    color = terminal.color_enabled(out)
    head = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    out.write((f"\x1b[1m{head}\x1b[0m" if color else head) + "\n")
    for row in rows:
        out.write("  ".join(sanitize.pad(c, w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")
