"""Provides `DetailPane`: one entry in full — content as Markdown, provenance, concepts, supersession chain."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Markdown, Static

from mnemo_tui import text, timefmt
from mnemo_tui.model import Entry
from mnemo_tui.tui.data.chain import Chain
from mnemo_tui.tui.widgets.feed import absolute, headline


def _revision(entry: Entry, now: int) -> str:
    return (
        f"{absolute(entry.created_at)} ({timefmt.relative(entry.created_at, now)})  {text.line(headline(entry))[:44]}"
    )


class DetailPane(VerticalScroll, can_focus=True):
    """The entry under the feed's cursor, in full."""

    def __init__(self, clock: Callable[[], int], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.clock = clock
        self.entry: Entry | None = None
        self.place: Callable[[str], str] = lambda domain: domain

    def compose(self) -> ComposeResult:
        yield Static("", id="detail-head")
        yield Markdown("", id="detail-body")
        yield Static("", id="detail-meta")

    def show(self, entry: Entry | None) -> None:
        """Show an entry (its chain follows in `show_chain` once read)."""
        self.entry = entry
        head = self.query_one("#detail-head", Static)
        body = self.query_one("#detail-body", Markdown)
        meta = self.query_one("#detail-meta", Static)
        if entry is None:
            head.update(Content.styled("Loading …", "$text-muted"))
            body.update("")
            meta.update("")
            return
        now = self.clock()
        head.update(
            Content.from_markup(
                "[b]$time UTC[/b] [$text-muted]($age)  ·[/] [$text-secondary]$author[/] [$text-muted]·[/] "
                "[$text-success]$domain[/]",
                time=absolute(entry.created_at),
                age=timefmt.relative(entry.created_at, now),
                author=text.line(entry.author),
                domain=text.line(self.place(entry.domain)),
            )
        )
        body.update(text.block(entry.content))  # Markdown and newlines, never a terminal escape
        meta.update(self._meta(entry, None))
        self.scroll_home(animate=False)

    def show_chain(self, atom_id: str, chain: Chain) -> None:
        """Add the supersession chain, if it belongs to the entry still shown."""
        if self.entry is None or self.entry.atom_id != atom_id:
            return
        self.query_one("#detail-meta", Static).update(self._meta(self.entry, chain))

    def _meta(self, entry: Entry, chain: Chain | None) -> Content:
        prov = entry.provenance
        rows: list[tuple[str, str]] = [
            ("Principal", str(prov.get("principal") or "—")),
            ("Agent", str(prov.get("agent_name") or prov.get("agent") or "—")),
            ("Client", str(prov.get("client_env") or "—")),
            ("External", "yes" if prov.get("is_external") else "no"),
            ("Concepts", ", ".join(entry.concepts) or "—"),
        ]
        lines = [_line(name, "bold $text-muted", value) for name, value in rows]
        now = self.clock()
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


def _line(label: str, style: str, value: str) -> Content:
    """`label` padded to a column, styled, then the value (stored text) as one safe plain line."""
    return Content.from_markup(
        f"[{style}]$label[/]$value" if style else "$label$value", label=f"{label:<11}", value=text.line(value)
    )
