"""Provides `FeedScreen`: the sidebar of scopes, the live feed, its notices and the detail pane."""

from __future__ import annotations

from typing import ClassVar

from textual import getters, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import ContentSwitcher, Footer, Label, OptionList, Static

from mnemo_tui import text, timefmt
from mnemo_tui.model import Entry, RecentQuery, describe_scope, room_of
from mnemo_tui.tui import messages as msg
from mnemo_tui.tui.data.live import LiveTracker
from mnemo_tui.tui.data.scopes import ScopeItem, format_count
from mnemo_tui.tui.data.window import FeedWindow, PageRequest
from mnemo_tui.tui.plain import plain
from mnemo_tui.tui.screens.feed_io import FeedReads
from mnemo_tui.tui.screens.search import SearchScreen
from mnemo_tui.tui.session import Session
from mnemo_tui.tui.widgets.detail import DetailPane
from mnemo_tui.tui.widgets.feed import FeedView
from mnemo_tui.tui.widgets.notices import ErrorView, NewMarker, ReportView
from mnemo_tui.tui.widgets.sidebar import ActivityPanel, ScopeList

PENDING_CAP = 500


class FeedScreen(FeedReads):
    """The main screen. Workers read; the handlers below only update widgets, and drop stale results."""

    AUTO_FOCUS = "#feed"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("g,home", "top", "Top", show=False),
        Binding("G,end", "bottom", "Bottom", show=False),
        Binding("escape", "close", "Close", show=False),
        Binding("slash", "search", "Search"),
        Binding("c", "catch_up", "Caught up"),
        Binding("h", "history", "History"),
        Binding("r", "refresh", "Refresh"),
    ]

    scopes = getters.query_one("#scopes", ScopeList)
    activity_panel = getters.query_one("#activity", ActivityPanel)
    feed = getters.query_one("#feed", FeedView)
    switcher = getters.query_one("#feed-area", ContentSwitcher)
    report_view = getters.query_one("#report", ReportView)
    error_view = getters.query_one("#error", ErrorView)
    marker = getters.query_one("#new-marker", NewMarker)
    detail = getters.query_one("#detail", DetailPane)
    title_bar = getters.query_one("#feed-title", Label)
    status = getters.query_one("#status", Static)

    def __init__(self, session: Session, scope: str | None) -> None:
        super().__init__(session)
        self.scope = scope
        self.include_history = False
        self.generation = 0
        self.window = FeedWindow()
        self.tracker = LiveTracker(self.session.overlap)
        self.pending: list[Entry] = []
        self.pending_overflow = False
        self._inflight: set[int] = set()
        self._live_busy = False
        self._live_error: str | None = None
        self._scopes_requested = False
        self._first_oldest: int | None = None
        self._catching_up = False

    def compose(self) -> ComposeResult:
        with Horizontal(id="body"):
            with Vertical(id="sidebar"):
                yield Label("Scopes", id="scopes-title")
                yield ScopeList(id="scopes")
                yield ActivityPanel(id="activity")
            with Vertical(id="main"):
                yield Label("", id="feed-title")
                yield NewMarker("", id="new-marker")
                with ContentSwitcher(initial="feed", id="feed-area"):
                    yield FeedView(self.window, self.session.clock, id="feed")
                    yield ReportView(id="report")
                    yield ErrorView("", id="error")
                yield DetailPane(self.session.clock, id="detail")
        yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.marker.display = False
        self.detail.display = False
        self.detail.place = self.feed.place
        self.call_after_refresh(self._initial_focus)
        self.open_scope(self.scope)
        interval = self.session.poll_interval
        if interval:
            self.set_interval(interval, self.check_live)

    def _initial_focus(self) -> None:
        # The report may already be up (an empty scope): then its rooms take the focus, not the hidden feed.
        if self.switcher.current == "report":
            self._focus_report()
        else:
            self.feed.focus()

    def _focus_report(self) -> None:
        # An empty scope: its unsearched rooms if it lists any, else the sidebar to pick another scope.
        rooms = self.report_view.query_one("#report-rooms")
        (rooms if rooms.display else self.scopes).focus()

    # -- opening a scope ----------------------------------------------------------------

    def open_scope(self, scope: str | None) -> None:
        """Show a scope from its newest entry; anything still in flight for the old one is dropped."""
        self.scope = scope
        self.generation += 1
        self.window = FeedWindow(keep_pages=self.session.keep_pages)
        self.tracker = LiveTracker(self.session.overlap)
        self.pending, self.pending_overflow = [], False
        self._inflight.clear()
        self.feed.set_watermark(None, self.session.overlap)
        self.feed.set_window(self.window)
        self.marker.display = False
        self.switcher.current = "feed"
        self.scopes.mark_current(scope)
        self.activity_panel.show(None)
        self._update_title()
        self.request_page(PageRequest(0, None))
        self.load_watermark(self.generation, scope)

    def _query(self, cursor: str | None = None) -> RecentQuery:
        return RecentQuery(
            scope=self.scope, limit=self.session.page_size, cursor=cursor, include_history=self.include_history
        )

    def request_page(self, request: PageRequest) -> None:
        if request.index in self._inflight:
            return
        self._inflight.add(request.index)
        self.load_page(self.generation, request.index, self._query(request.cursor))

    def check_live(self) -> None:
        """Look for new entries (one poll at a time; none before the first page has arrived)."""
        if self._live_busy or not self.window.started:
            return
        self._live_busy = True
        self.poll(self.generation, self.tracker, self.scope, self.include_history)

    # -- handlers: update widgets only ----------------------------------------------------

    def _after_first_read(self) -> None:
        # The sidebar is read once the feed has painted (or failed), so it never delays the first paint.
        if not self._scopes_requested:
            self._scopes_requested = True
            self.load_scopes()

    @on(msg.PageLoaded)
    def page_loaded(self, message: msg.PageLoaded) -> None:
        if message.generation != self.generation:
            return
        self._inflight.discard(message.index)
        self.call_after_refresh(self._after_first_read)
        if message.index == 0 and not self.window.started:
            self.tracker.token = message.token
        if not self.window.add_page(message.index, message.page):
            return
        self.tracker.observe(message.page.items)
        if message.index == 0:
            self._first_page_shown(message)
        self.feed.loading = False
        first, last = self.feed.visible_rows()
        self.window.evict(first, last)
        self.feed.rows_changed()
        self._update_status()

    def _first_page_shown(self, message: msg.PageLoaded) -> None:
        items = message.page.items
        if not items and message.page.next_cursor is None:
            self.load_report(self.generation, self._query())
        else:
            self.switcher.current = "feed"
            self.feed.post_message(FeedView.Highlighted(self.feed.current, self.feed.cursor))
        newest = items[0].created_at if items else None
        oldest = items[-1].created_at if items else None
        self._first_oldest = oldest
        self.load_activity(self.generation, self.scope, newest, oldest)

    @on(msg.PageFailed)
    def page_failed(self, message: msg.PageFailed) -> None:
        if message.generation != self.generation:
            return
        self._inflight.discard(message.index)
        self._after_first_read()
        self.app.notify(text.line(message.error.message), title="Read failed", severity="error", markup=False)
        if not self.window.started:
            self.error_view.show_error(message.error)
            self.switcher.current = "error"
        self._update_status()

    @on(msg.ReportLoaded)
    def report_loaded(self, message: msg.ReportLoaded) -> None:
        if message.generation != self.generation or self.window.row_count:
            return
        self.report_view.show(message.report)
        self.switcher.current = "report"
        if not self.scopes.has_focus:
            self._focus_report()

    @on(msg.ActivityLoaded)
    def activity_loaded(self, message: msg.ActivityLoaded) -> None:
        if message.generation == self.generation:
            self.activity_panel.show(message.activity)

    @on(msg.WatermarkLoaded)
    def watermark_loaded(self, message: msg.WatermarkLoaded) -> None:
        if message.generation == self.generation:
            self.feed.set_watermark(message.watermark, self.session.overlap)
            self._update_status()

    @on(msg.ScopesLoaded)
    def scopes_loaded(self, message: msg.ScopesLoaded) -> None:
        self.scopes.show_scopes(message.items, self.scope)
        self.feed.set_room_names({i.scope: i.label for i in message.items if i.kind == "room" and i.scope})
        self._update_title()
        for item in message.items:
            self.scopes.set_count(item.scope, "…")
        self.load_counts()

    @on(msg.Problem)
    def problem(self, message: msg.Problem) -> None:
        self.app.notify(
            text.line(message.error.message), title="A background read failed", severity="error", markup=False
        )

    @on(msg.ScopesFailed)
    def scopes_failed(self, message: msg.ScopesFailed) -> None:
        self.app.notify(text.line(message.error.message), title="Could not list scopes", severity="error", markup=False)

    @on(msg.CountLoaded)
    def count_loaded(self, message: msg.CountLoaded) -> None:
        self.scopes.set_count(message.scope, "?" if message.count < 0 else format_count(message.count))

    @on(msg.LiveFound)
    def live_found(self, message: msg.LiveFound) -> None:
        self._live_busy = False
        if self._live_error is not None:
            self._live_error = None
            self._update_status()
        if message.generation != self.generation or message.batch is None:
            return
        batch = message.batch
        if not batch.entries and not batch.overflow:
            return
        self.tracker.observe(batch.entries)
        self.pending[:0] = batch.entries
        self.pending_overflow = self.pending_overflow or batch.overflow or len(self.pending) > PENDING_CAP
        del self.pending[PENDING_CAP:]
        if self.feed.at_top and self.switcher.current != "error":
            self.merge_pending()
        else:
            self.marker.show_count(len(self.pending), self.pending_overflow)
        known = {item.scope for item in self.scopes.items.values()}
        if any(entry.domain not in known for entry in batch.entries):
            self.load_scopes()  # a new domain (or room) appeared: its line and count join the sidebar
        else:
            self.load_counts()
        newest = self.window.newest()
        self.load_activity(self.generation, self.scope, newest.created_at if newest else None, self._first_oldest)

    @on(msg.LiveFailed)
    def live_failed(self, message: msg.LiveFailed) -> None:
        self._live_busy = False
        self._live_error = message.error.message
        self._update_status()

    def merge_pending(self) -> None:
        """Show the held new entries on top (or re-read the scope when there were too many to hold)."""
        if self.pending_overflow:
            self.open_scope(self.scope)
            return
        if not self.pending:
            return
        self.window.prepend(self.pending)
        self.pending = []
        self.marker.display = False
        if self.switcher.current == "report":
            self.switcher.current = "feed"
            self.feed.focus()
        self.feed.rows_changed()
        self.feed.post_message(FeedView.Highlighted(self.feed.current, self.feed.cursor))
        self._update_status()

    @on(msg.ChainLoaded)
    def chain_loaded(self, message: msg.ChainLoaded) -> None:
        self.detail.show_chain(message.atom_id, message.chain)

    @on(msg.CaughtUp)
    def caught_up(self, message: msg.CaughtUp) -> None:
        self._catching_up = False
        result = message.result
        after = result.after
        mark = timefmt.to_iso(after.created_at) if after and after.created_at is not None else "none"
        self.app.notify(f"{result.delivered} new entries read; watermark {mark}", title="Marked caught up")
        if message.scope == self.scope:
            self.feed.set_watermark(after, self.session.overlap)
        self.load_counts()
        self._update_status()

    @on(msg.CatchUpFailed)
    def catch_up_failed(self, message: msg.CatchUpFailed) -> None:
        self._catching_up = False
        self.app.notify(
            text.line(message.error.message), title="Could not mark caught up", severity="error", markup=False
        )

    @on(FeedView.NeedRows)
    def need_rows(self, message: FeedView.NeedRows) -> None:
        for request in self.window.missing(message.first, message.last):
            self.request_page(request)
        nxt = self.window.next_request()
        if nxt is not None and self.window.started:
            self.request_page(nxt)

    @on(FeedView.Moved)
    def moved(self) -> None:
        if self.pending and self.feed.at_top:
            self.merge_pending()

    @on(FeedView.Highlighted)
    def highlighted(self, message: FeedView.Highlighted) -> None:
        if self.detail.display:
            self._show_detail(message.entry)

    @on(FeedView.Selected)
    def selected(self, message: FeedView.Selected) -> None:
        self.detail.display = True
        self._show_detail(message.entry)

    @on(ReportView.RoomChosen)
    def room_chosen(self, message: ReportView.RoomChosen) -> None:
        self.open_scope(message.address)
        self.feed.focus()

    @on(OptionList.OptionSelected, "#scopes")
    def scope_chosen(self, message: OptionList.OptionSelected) -> None:
        item = self.scopes.items.get(message.option.id or "")
        if item is not None:
            self.open_scope(item.scope)
            self.feed.focus()

    def _show_detail(self, entry: Entry | None) -> None:
        self.detail.show(entry)
        if entry is not None and (entry.supersedes or entry.superseded_by):
            self.load_chain(entry)

    def show_entry(self, entry: Entry) -> None:
        """Open the detail pane on an entry (a search result)."""
        self.detail.display = True
        self._show_detail(entry)

    # -- actions ------------------------------------------------------------------------

    def action_top(self) -> None:
        self.feed.go_top()
        self.merge_pending()

    def action_bottom(self) -> None:
        self.feed.go_bottom()

    def action_close(self) -> None:
        if self.detail.display:
            self.detail.display = False
        self.feed.focus()

    def action_search(self) -> None:
        def opened(entry: Entry | None) -> None:
            if entry is not None:
                self.show_entry(entry)

        self.app.push_screen(SearchScreen(self.session, self.scope, self.include_history), opened)

    def action_catch_up(self) -> None:
        if self._catching_up:
            self.app.notify("Already marking caught up …", timeout=2)
            return
        self._catching_up = True
        self.app.notify(f"Marking {describe_scope(self.scope, text.quoted)} caught up …", timeout=2, markup=False)
        self.run_catch_up(self.scope)

    def action_history(self) -> None:
        self.include_history = not self.include_history
        self.open_scope(self.scope)

    def action_refresh(self) -> None:
        self._scopes_requested = True
        self.load_scopes()
        self.open_scope(self.scope)

    def switch_scope(self, scope: str | None) -> None:
        """Open another scope (the command palette's entry point)."""
        self.open_scope(scope)

    # -- text ---------------------------------------------------------------------------

    def _update_title(self) -> None:
        if self.scope is None:
            name = "Own store"
        elif room_of(self.scope) is None:
            name = f"Domain {self.scope}"
        elif self.scope in self.feed.room_names:
            name = f"Room {self.feed.room_names[self.scope]}  ·  {self.scope}"
        else:
            name = f"Room {self.scope}"
        history = "  ·  with history" if self.include_history else ""
        self.title_bar.update(plain(f"{name}{history}"))

    def _update_status(self) -> None:
        parts = [f"{self.window.row_count} loaded" + (", end reached" if self.window.at_end else "")]
        parts.append(f"consumer {self.session.consumer}")
        mark = self.feed.watermark
        parts.append("● new: no watermark yet" if mark is None or mark.created_at is None else "● new since watermark")
        if self.include_history:
            parts.append("history shown")
        parts.append(f"live paused: {self._live_error}" if self._live_error else "live")
        self.status.update(plain("  ·  ".join(parts)))

    def scope_items(self) -> list[ScopeItem]:
        return list(self.scopes.items.values())
