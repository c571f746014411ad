"""Provides `SearchScreen`: search the current scope (`/`) and open a hit in the detail pane."""

from __future__ import annotations

from typing import ClassVar, Literal

from textual import getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.screen import ModalScreen
from textual.signal import Signal
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from mnemo_tui import sanitize
from mnemo_tui.catchup import empty_reports
from mnemo_tui.errors import MnemoError
from mnemo_tui.limits import describe_scope
from mnemo_tui.tui.data.errors import as_error
from mnemo_tui.tui.plain import plain, plain_block
from mnemo_tui.tui.session import Session
from mnemo_tui.tui.widgets.notices import report_head, room_options
from mnemo_tui.tui.widgets.rows import absolute, fit, headline
from mnemo_tui.values.model import EmptyReport, Entry
from mnemo_tui.values.search import SearchHit, SearchQuery

SEARCH_HITS = 50  # the hits a search lists


class SearchDone(Message):
    def __init__(
        self, token: int, hits: list[SearchHit] | None, error: MnemoError | None, report: EmptyReport | None = None
    ) -> None:
        super().__init__()
        self.token = token
        self.hits = hits
        self.error = error
        self.report = report


class SearchScreen(ModalScreen[Entry | None]):
    """A query box over the current scope; enter searches, enter on a hit opens it, escape goes back.

    A hit removed elsewhere while the dialog is open leaves the list, as a row leaves the feed: the
    feed's live path publishes the removals of its scope it sees (`removals`), shown there or not.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss_none", "Back"),
        Binding("ctrl+o", "order", "Order", show=False),  # free in the query box and the list alike
    ]

    query_input = getters.query_one("#search-input", Input)
    results = getters.query_one("#search-results", OptionList)
    caption = getters.query_one("#search-caption", Label)
    report = getters.query_one("#search-report", Static)
    rooms = getters.query_one("#search-rooms", OptionList)
    heading = getters.query_one("#search-title", Label)

    def __init__(
        self,
        session: Session,
        scope: str | None,
        include_history: bool,
        removals: Signal[set[str] | None],
        words: str = "",
    ) -> None:
        super().__init__()
        self.session = session
        self.words = words
        self.scope = scope
        self.include_history = include_history
        self.removals = removals
        self.hits: dict[str, Entry] = {}
        # Removals seen since the dialog opened: a search read before one but answered after it is filtered.
        self.removed: set[str] = set()
        self.gone = 0  # hits of the list shown that were removed elsewhere
        self.more = False  # the search found more than `SEARCH_HITS` (the list shows the first ones)
        self._searched: str | None = None
        self._token = 0
        # As `mnemo search --order-by`: the best matches first, or the newest (`ctrl+o` toggles).
        self.order: Literal["relevance", "recency"] = "relevance"
        self._room_names: dict[str, str] = {}  # the rooms an empty report offered, by address

    def compose(self) -> ComposeResult:
        with Vertical(id="search-box"):
            yield Label(self._title(), id="search-title")
            yield Input(placeholder="words to look for …", id="search-input", select_on_focus=False)
            yield Label(f"Enter to search · {self._order_hint()} · Esc to go back", id="search-caption")
            yield Static("", id="search-report")
            yield OptionList(id="search-rooms")
            yield OptionList(id="search-results")

    def _title(self) -> Content:
        name = self._room_names.get(self.scope or "")
        where = f"room {sanitize.quoted(name)}" if name else describe_scope(self.scope, sanitize.quoted)
        return plain(f"Search {where}")

    def _order_hint(self) -> str:
        """The order shown and the key to the other one (the caption's words)."""
        return "best matches first (ctrl+o: newest)" if self.order == "relevance" else "newest first (ctrl+o: best)"

    def on_mount(self) -> None:
        self.query_input.cursor_blink = False
        self.query_input.focus()
        self.report.display = False
        self.rooms.display = False
        self.removals.subscribe(self, self._removed)
        if self.words:
            self.query_input.value = self.words
            self._search(self.words)

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        words = event.value.strip()
        if not words:
            self.caption.update("Type some words first: the feed itself is the read without a query.")
            return
        self._search(words)

    def _search(self, words: str) -> None:
        self._token += 1
        self._searched = words
        self.caption.update("Searching …")
        self.report.display = False
        self.rooms.display = False
        self.run_search(self._token, words, self.scope, self.order)

    def action_order(self) -> None:
        """Toggle between the best matches first and the newest first; a search made is made again."""
        self.order = "recency" if self.order == "relevance" else "relevance"
        if self._searched is not None:
            self._search(self._searched)
        else:
            self.caption.update(f"Enter to search · {self._order_hint()} · Esc to go back")

    @work(thread=True, exclusive=True, exit_on_error=False)
    def run_search(self, token: int, words: str, scope: str | None, order: Literal["relevance", "recency"]) -> None:
        query = SearchQuery(
            query=words, scope=scope, order_by=order, include_history=self.include_history, top_k=SEARCH_HITS + 1
        )  # one more: whether more exist
        backend = self.session.backend
        try:
            hits = backend.search(query)
            # Nothing found: the same report as `mnemo search`, naming the rooms an unscoped search left out.
            report = None if hits else empty_reports.for_search(backend, words, scope)
            self.post_message(SearchDone(token, hits, None, report))
        except Exception as exc:  # noqa: BLE001 - shown in the dialog, which stays open
            self.post_message(SearchDone(token, None, as_error(exc)))

    @on(SearchDone)
    def done(self, message: SearchDone) -> None:
        if message.token != self._token:
            return
        if message.error is not None or message.hits is None:
            self.caption.update(plain(f"Search failed: {message.error.message if message.error else '?'}"))
            return
        self.more = len(message.hits) > SEARCH_HITS
        first = message.hits[:SEARCH_HITS]
        hits = [hit for hit in first if hit.entry.atom_id not in self.removed]
        self.gone = len(first) - len(hits)
        self.hits = {hit.entry.atom_id: hit.entry for hit in hits}
        # One line a hit, at any width: the first line is cut with … to what the time and the domain leave
        # (a fixed cut wrapped every hit over two lines at 60 columns); the domain gives way below that.
        results = self.results
        room = results.scrollable_content_region.width - 18
        if not results.show_vertical_scrollbar and len(hits) > results.scrollable_content_region.height:
            room -= results.styles.scrollbar_size_vertical  # the scrollbar these hits are about to bring
        domain = room - 16 >= 12
        room = room - 16 if domain else room
        self.results.set_options(
            Option(
                Content.assemble(
                    (absolute(hit.entry.created_at), "$text-muted"),
                    "  ",
                    (fit(sanitize.line(hit.entry.domain), 14) if domain else "", "$accent"),
                    "  " if domain else "",
                    fit(sanitize.line(headline(hit.entry)), max(room, 1)).rstrip(),
                ),
                id=hit.entry.atom_id,
            )
            for hit in hits
        )
        if message.report is not None:
            self._show_report(message.report)
        self._count()
        if hits:
            self.results.highlighted = 0
            self.results.focus()

    def _show_report(self, report: EmptyReport) -> None:
        """The CLI's empty report, its rooms a list: choosing one searches it with the same words (what the
        CLI's "Re-run with --scope xroom:…" asks for, which a dialog cannot be told)."""
        head = report_head(report)
        if report.unsearched_rooms:
            head += ["", "Enter on a room searches it:"]
        self.report.update(plain_block("\n".join(head)))
        self.report.display = True
        self._room_names = {room.address: room.name for room in report.unsearched_rooms}
        self.rooms.set_options(room_options(report))
        self.rooms.display = bool(report.unsearched_rooms)
        if report.unsearched_rooms:
            self.rooms.highlighted = 0
            self.rooms.focus()

    @on(OptionList.OptionSelected, "#search-rooms")
    def room_chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id is not None and self._searched is not None:
            self.scope = event.option.id
            self.heading.update(self._title())
            self.query_input.focus()
            self._search(self._searched)

    def _count(self) -> None:
        n = len(self.hits)
        gone = f" · {self.gone} removed elsewhere" if self.gone else ""
        # As `mnemo search` says "More results exist": a capped list must not read as all there is.
        found = f"the first {n} hits · more exist: narrow the words" if self.more else f"{n} hit{'s' if n != 1 else ''}"
        self.caption.update(f"{found}{gone} · {self._order_hint()} · Enter opens one · Esc to go back")

    def _removed(self, ids: set[str] | None) -> None:
        """Drop the hits removed elsewhere; the highlight stays on its hit, or, if it went, on the next one."""
        if ids is None:  # removals were dropped unseen: the feed is read again, and so is the search
            if self._searched is not None:
                self._search(self._searched)
            return
        self.removed |= ids
        order = list(self.hits)
        if not any(atom_id in ids for atom_id in order):
            return
        results = self.results
        at = results.highlighted
        for atom_id in order:
            if atom_id in ids:
                del self.hits[atom_id]
                results.remove_option(atom_id)
        self.gone += len(order) - len(self.hits)
        if at is not None:
            # The next hit still listed below the highlighted one (the feed's "next older row"), else the last.
            after = [atom_id for atom_id in order[at:] if atom_id in self.hits] or list(self.hits)[-1:]
            results.highlighted = results.get_option_index(after[0]) if after else None
        if not self.hits and results.has_focus:
            self.query_input.focus()
        self._count()

    @on(OptionList.OptionSelected, "#search-results")
    def chosen(self, event: OptionList.OptionSelected) -> None:
        entry = self.hits.get(event.option.id or "")
        if entry is not None:
            self.dismiss(entry)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
