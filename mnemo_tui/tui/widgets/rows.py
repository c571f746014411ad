"""Provides the feed's rows as strips: which columns fit a width, cut with an ellipsis, cached by what they show."""

from __future__ import annotations

from collections.abc import Callable

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.cache import LRUCache
from textual.strip import Strip

from mnemo_tui import sanitize, timefmt
from mnemo_tui.values.model import Entry, Value

SHORT_ID = 8  # the id a CLI table shows and every verb takes (`mnemo show 1a2b3c4d`)
ELLIPSIS = "…"


def short_id(atom_id: str) -> str:
    """The short id the CLI accepts: the first 8 hex characters."""
    return atom_id[:SHORT_ID]


def headline(entry: Entry) -> str:
    """The entry's first line as a feed shows it: a Markdown heading's `#` marks dropped."""
    line = entry.first_line
    return line.lstrip("#").strip() or line if line.startswith("#") else line


MORE = " ⏎…"  # after a row's first line: the entry has more lines


def more_lines(entry: Entry) -> bool:
    """Whether the content has text past the line a row shows."""
    first = entry.first_line
    rest = entry.content.strip()
    return bool(first) and rest != first and len(rest) > len(first)


# Ages (`now`, `45s`, `12m`; `(3m ago)` in the detail pane) are drawn from the clock: redrawn this often,
# an idle screen's stay true.
AGE_SECONDS = 5


def absolute(us: int) -> str:
    """`2026-11-30 07:45` (UTC)."""
    return timefmt.to_iso(us)[:16].replace("T", " ")


def age(us: int, now: int) -> str:
    """A compact age: `now`, `45s`, `12m`, `3h`, `4d`, `5mo`, `2y` (at most 4 cells)."""
    said = timefmt.relative(us, now)
    return {"just now": "now", "in future": "soon"}.get(said, said.removesuffix(" ago"))


def fit(value: str, width: int) -> str:
    """`value` in exactly `width` cells: padded, or cut with an ellipsis (wide characters counted as two)."""
    if width <= 0:
        return ""
    if cell_len(value) <= width:
        return set_cell_size(value, width)
    return set_cell_size(value, width - 1) + ELLIPSIS


def end_line(shown: int, loaded: int, filtered: bool, at_end: bool) -> str:
    """The line under the last row: older entries loading, the end, or what the filter matches of those loaded."""
    if filtered:
        return f"── {shown} of {loaded} loaded entries match · enter searches them all ──"
    if at_end:
        return "── end of the feed ──" if shown else ""
    return "── loading older entries … ──"


def author_in(entry: Entry, width: int) -> str:
    """Who wrote an entry in `width` cells: `principal/agent`, or where that does not fit the agent first
    (`…/planner`, as `gh` drops an owner before a name), the part that tells one bot from another."""
    who = sanitize.line(entry.author)
    prov = entry.provenance
    agent = sanitize.line(str(prov.get("agent_name") or prov.get("agent") or ""))
    if not agent or cell_len(who) <= width:
        return fit(who, width)
    short = ELLIPSIS + "/" + agent
    return fit(short if cell_len(short) <= width else agent, width)


class Columns(Value):
    """Which columns a row of a given width shows, and how wide each is."""

    ids: bool
    author: int
    domain: int

    @staticmethod
    def of(width: int, show_domain: bool) -> Columns:
        """Content first: the id from 30 cells, the author from 70, the domain (outside a one-domain scope) from 90."""
        author = 16 if width >= 120 else 12 if width >= 70 else 0
        domain = (14 if width >= 120 else 12) if show_domain and width >= 90 else 0
        return Columns(ids=width >= 30, author=author, domain=domain)


class RowPainter:
    """Draws one feed row: `●` new, age, short id, author, domain, a history mark, the first line (and ` ⏎…`
    when more lines follow).

    Args:
        style: a component class's style (the widget's, computed once per style change).
    """

    def __init__(self, style: Callable[[str], Style]) -> None:
        self.style = style
        # Rendered rows by what they show; a repaint of an unchanged screen builds no strips.
        self._cache: LRUCache[tuple[object, ...], Strip] = LRUCache(256)

    def clear(self) -> None:
        self._cache.clear()

    def paint(
        self, entry: Entry, *, width: int, now: int, fresh: bool, cursor: bool, show_domain: bool, place: str
    ) -> Strip:
        shown_age = age(entry.created_at, now)
        key = (entry.atom_id, entry.superseded_by, cursor, width, shown_age, fresh, show_domain, place)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        cols = Columns.of(width, show_domain)
        old = entry.superseded_by is not None
        parts: list[tuple[str, str]] = [
            ("● " if fresh else "  ", "feed--new"),
            (shown_age.rjust(4) + " ", "feed--time"),
        ]
        if cols.ids:
            parts.append((short_id(entry.atom_id) + "  ", "feed--id"))
        if cols.author:
            parts.append((author_in(entry, cols.author) + "  ", "feed--author"))
        if cols.domain:
            parts.append((fit(sanitize.line(place), cols.domain) + "  ", "feed--domain"))
        if old:
            successor = short_id(entry.superseded_by or "")
            tag = f"superseded → {successor} " if width >= 60 else f"old→{successor} "
            parts.append((tag, "feed--tag"))
        used = sum(cell_len(part) for part, _ in parts)
        room = width - used
        if more_lines(entry) and room > len(MORE) + 1:
            # The first line, then a mark that more follows (the detail pane has it all).
            shown = fit(sanitize.line(headline(entry)), room - len(MORE)).rstrip()
            parts.append((shown, "feed--text"))
            parts.append((fit(MORE, width - used - cell_len(shown)), "feed--tag"))
        else:
            parts.append((fit(sanitize.line(headline(entry)), room), "feed--text"))
        extra = self.style("feed--superseded") if old else None
        if cursor:
            extra = self.style("feed--cursor") if extra is None else extra + self.style("feed--cursor")
        segments = [Segment(part, self.style(name) + extra if extra else self.style(name)) for part, name in parts]
        strip = Strip(segments, width).crop(0, width)
        self._cache[key] = strip
        return strip
