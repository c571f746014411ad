"""Provides `DetailPane`: one entry in full — content as Markdown, provenance, concepts, revisions and what changed."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from markdown_it import MarkdownIt
from textual import on, work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.widgets import Markdown, Static

from mnemo_tui import sanitize, timefmt
from mnemo_tui.tui.data.chain import Chain, supersession_chain
from mnemo_tui.tui.data.errors import as_error
from mnemo_tui.tui.session import Session
from mnemo_tui.tui.widgets.rows import AGE_SECONDS, absolute, headline, short_id
from mnemo_tui.values.model import Entry

DIFF_LINES = 40  # a longer diff ends with how many lines were left out


def _parser() -> MarkdownIt:
    """Textual's own parser (`gfm-like`) with raw HTML read as text: with it, `Vec<T>` showed as `Vec` and
    `a<b and c>d` as `ad` (Textual drops the tags it parses; a stored entry is shown whole)."""
    return MarkdownIt("gfm-like", {"html": False})


def _revision(entry: Entry, now: int) -> str:
    """One revision's line as stored text: `_line` makes it safe, once (escaping here too showed `\\x1b`)."""
    when = f"{absolute(entry.created_at)} ({timefmt.relative(entry.created_at, now)})"
    return f"{short_id(entry.atom_id)}  {when}  {headline(entry)}"  # cut to the pane's width, with …, by CSS


def content_diff(old: Entry, new: Entry) -> list[tuple[str, str]]:
    """What changed from one revision's content to the next, as (`+`, `-` or ` `, line) pairs, context 1."""
    lines = difflib.unified_diff(old.content.splitlines(), new.content.splitlines(), n=1, lineterm="")
    return [(line[0], line[1:]) for line in lines if not line.startswith(("---", "+++", "@@"))]


class DetailPane(VerticalScroll, can_focus=True):
    """The entry under the feed's cursor, in full; it reads the entry's supersession chain itself."""

    class _Chained(Message, bubble=False):
        def __init__(self, atom_id: str, chain: Chain) -> None:
            super().__init__()
            self.atom_id = atom_id
            self.chain = chain

    def __init__(self, session: Session, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.session = session
        self.entry: Entry | None = None
        self.chain: Chain | None = None
        self.place: Callable[[str], str] = lambda domain: domain

    def compose(self) -> ComposeResult:
        yield Static("", id="detail-head")
        yield Markdown("", id="detail-body", parser_factory=_parser)
        yield Static("", id="detail-changes")
        yield Static("", id="detail-meta")

    def on_mount(self) -> None:
        self.set_interval(AGE_SECONDS, self._aged)

    def _aged(self) -> None:
        """Redraw the head's `(3m ago)`, which would otherwise keep the age the entry had when opened."""
        if self.display and self.entry is not None:
            self._head(self.entry)

    def show(self, entry: Entry | None) -> None:
        """Show an entry; its chain (and what changed) follows once read."""
        self.entry, self.chain = entry, None
        head = self.query_one("#detail-head", Static)
        body = self.query_one("#detail-body", Markdown)
        meta = self.query_one("#detail-meta", Static)
        self.query_one("#detail-changes", Static).update("")
        if entry is None:
            head.update(Content.styled("Loading …", "$text-muted"))
            body.update("")
            meta.update("")
            return
        self._head(entry)
        body.update(sanitize.block(entry.content))  # Markdown and newlines, never a terminal escape
        meta.update(self._meta(entry, None))
        self.scroll_home(animate=False)
        if entry.supersedes or entry.superseded_by:
            self.load_chain(entry)

    def _head(self, entry: Entry) -> None:
        now = self.session.clock()
        after = entry.superseded_by
        self.query_one("#detail-head", Static).update(
            Content.from_markup(
                "[b]$id[/b]  [b]$time UTC[/b] [$text-muted]($age)  ·[/] [$text-secondary]$author[/] "
                "[$text-muted]·[/] [$text-success]$domain[/][$text-warning]$old[/]",
                id=short_id(entry.atom_id),
                time=absolute(entry.created_at),
                age=timefmt.relative(entry.created_at, now),
                author=sanitize.line(entry.author),
                domain=sanitize.line(self.place(entry.domain)),
                old=f" · superseded by {short_id(after)}" if after else "",
            )
        )

    @work(thread=True, group="detail", exclusive=True, exit_on_error=False)
    def load_chain(self, entry: Entry) -> None:
        try:
            self.post_message(self._Chained(entry.atom_id, supersession_chain(self.session.backend, entry)))
        except Exception as exc:  # noqa: BLE001 - the pane then says the revisions could not be read
            error = as_error(exc)
            self.app.call_from_thread(
                self.app.notify, sanitize.line(error.message), title="Could not read the revisions", markup=False
            )

    @on(_Chained)
    def _chained(self, message: _Chained) -> None:
        """Add the supersession chain, if it belongs to the entry still shown."""
        if self.entry is None or self.entry.atom_id != message.atom_id:
            return
        self.chain = message.chain
        self.query_one("#detail-changes", Static).update(Content("\n").join(_changes(self.entry, message.chain)))
        self.query_one("#detail-meta", Static).update(self._meta(self.entry, message.chain))

    def _meta(self, entry: Entry, chain: Chain | None) -> Content:
        prov = entry.provenance
        rows: list[tuple[str, str]] = [
            ("Id", entry.atom_id),
            ("Principal", str(prov.get("principal") or "—")),
            ("Agent", str(prov.get("agent_name") or prov.get("agent") or "—")),
            ("Client", str(prov.get("client_env") or "—")),
            ("External", "yes" if prov.get("is_external") else "no"),
            ("Concepts", ", ".join(entry.concepts) or "—"),
        ]
        lines = [_line(name, "bold $text-muted", value) for name, value in rows]
        now = self.session.clock()
        if not entry.supersedes and not entry.superseded_by:
            lines.append(_line("Revisions", "bold $text-muted", "this is the only revision"))
        elif chain is None:
            lines.append(_line("Revisions", "bold $text-muted", "reading …"))
        else:
            lines.append(_line("Revisions", "bold $text-muted", ""))
            lines += [_line("  newer", "$text-success", _revision(e, now)) for e in reversed(chain.newer)]
            lines.append(_line("  this", "bold", _revision(entry, now)))
            lines += [_line("  older", "$text-warning", _revision(e, now)) for e in chain.older]
            if chain.unreadable:
                lines.append(_line("", "", f"{len(chain.unreadable)} revision(s) could not be read"))
        return Content("\n").join(lines)


def _changes(entry: Entry, chain: Chain) -> list[Content]:
    """What this revision changed from the one it superseded (or, for the first, what the next one changed)."""
    if chain.older:
        old, new, said = chain.older[0], entry, f"Changed from {short_id(chain.older[0].atom_id)}"
    elif chain.newer:
        old, new, said = entry, chain.newer[0], f"Changed in {short_id(chain.newer[0].atom_id)}"
    else:
        return []
    diff = content_diff(old, new)
    lines = [_line(said, "bold $text-muted", "" if diff else "  (the same content)")]
    styles = {"+": "$text-success", "-": "$text-error", " ": "$text-muted"}
    for sign, line in diff[:DIFF_LINES]:
        lines.append(Content.from_markup(f"[{styles[sign]}]$line[/]", line=f"{sign} {sanitize.line(line)}"))
    if len(diff) > DIFF_LINES:
        lines.append(Content.styled(f"… {len(diff) - DIFF_LINES} more lines", "$text-muted"))
    return lines


def _line(label: str, style: str, value: str) -> Content:
    """`label` padded to a column, styled, then the value (stored text) as one safe plain line."""
    return Content.from_markup(
        f"[{style}]$label[/]$value" if style else "$label$value", label=f"{label:<11}", value=sanitize.line(value)
    )
