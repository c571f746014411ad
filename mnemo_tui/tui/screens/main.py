"""Provides `FeedScreen`: the layout (sidebar, feed, notices, detail pane), its keys, and what goes where (the
dialogs its widgets ask for are the app's to open)."""

from __future__ import annotations

from typing import ClassVar

from rich.cells import cell_len
from textual import getters, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Footer, Label, OptionList, Static

from mnemo_tui import sanitize, timefmt
from mnemo_tui.limits import describe_scope, room_of
from mnemo_tui.tui.actions import EntryActions
from mnemo_tui.tui.plain import plain
from mnemo_tui.tui.session import Session
from mnemo_tui.tui.widgets.detail import DetailPane
from mnemo_tui.tui.widgets.feed import FeedView
from mnemo_tui.tui.widgets.filter import FilterBar
from mnemo_tui.tui.widgets.notices import ErrorView, NewMarker, ReportView
from mnemo_tui.tui.widgets.rows import fit
from mnemo_tui.tui.widgets.sidebar import ActivityPanel, ScopeList
from mnemo_tui.values.model import Watermark

# How long `u` can undo a `c`.
UNDO_SECONDS = 10
# The fewest cells of a reason the status line shows (cut with `…`); with less room, it is left out.
REASON_CELLS = 20


def status_line(long: list[str], short: list[str], reason: str | None, width: int) -> str:
    """The status line in `width` cells: the long words, else the short ones (a narrow terminal keeps the
    whole line in fewer words); the last word followed by `reason` (why live is paused), whole where it
    fits, else cut with `…` while `REASON_CELLS` of it fit, else left out."""
    said = [f"{words[-1]}: {reason}" if reason else words[-1] for words in (long, short)]
    for words, last in zip((long, short), said, strict=True):
        line = " · ".join([*words[:-1], last])
        if cell_len(line) <= width:
            return line
    if not reason:
        return line
    head = " · ".join([*short[:-1], f"{short[-1]}: "])
    room = width - cell_len(head)
    return head + fit(reason, room) if room >= REASON_CELLS else " · ".join(short)


class FeedScreen(Screen[None]):
    """The main screen. The widgets read their own data; the screen decides what is shown where."""

    AUTO_FOCUS = "#feed"
    # Below 60 columns the sidebar hides itself (`b` brings it back); it narrows below 100.
    # (Textual declares these as plain attributes: a ClassVar annotation here would contradict it.)
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (70, "-medium"), (100, "-wide")]  # noqa: RUF012
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]  # noqa: RUF012

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", show=False),
        Binding("slash", "filter", "Filter"),
        Binding("c", "catch_up", "Caught up"),
        Binding("u", "undo", "Undo", show=False),
        Binding("v", "history", "History"),
        Binding("r", "refresh", "Refresh", show=False),
        Binding("b", "app.toggle_class('#body', '-sidebar-toggled')", "Sidebar", show=False),
        Binding("y", "act('copy_id')", "Copy id", show=False),
        Binding("Y", "act('copy_content')", "Copy content", show=False),
        Binding("o", "act('page')", "Open in $PAGER", show=False),
        Binding("e", "act('revise')", "Revise", show=False),
        Binding("w", "act('write')", "Write", show=False),
        Binding("d", "act('delete')", "Delete", show=False),
        *(Binding(str(n), f"jump({n})", f"Scope {n}", show=False) for n in range(1, 10)),
    ]

    sidebar = getters.query_one("#sidebar", Vertical)
    scopes = getters.query_one("#scopes", ScopeList)
    activity_panel = getters.query_one("#activity", ActivityPanel)
    feed = getters.query_one("#feed", FeedView)
    switcher = getters.query_one("#feed-area", ContentSwitcher)
    report_view = getters.query_one("#report", ReportView)
    error_view = getters.query_one("#error", ErrorView)
    marker = getters.query_one("#new-marker", NewMarker)
    detail = getters.query_one("#detail", DetailPane)
    title_bar = getters.query_one("#feed-title", Label)
    filter_bar = getters.query_one("#filter", FilterBar)
    status = getters.query_one("#status", Static)

    def __init__(self, session: Session, scope: str | None) -> None:
        super().__init__()
        self.session = session
        self.first_scope = scope
        rooms = lambda: [i.room for i in self.scopes.items.values() if i.room is not None]  # noqa: E731
        self.actions = EntryActions(self, session, rooms, done=lambda: self.open_scope(self.scope))
        self.undoable: tuple[str | None, str, Watermark | None] | None = None

    def compose(self) -> ComposeResult:
        session = self.session
        with Horizontal(id="body"):
            with Vertical(id="sidebar"):
                yield Label("Scopes", id="scopes-title")
                yield ScopeList(session, id="scopes")
                yield ActivityPanel(session, id="activity")
            with Vertical(id="main"):
                yield Label("", id="feed-title")
                feed = FeedView(session, id="feed")
                yield FilterBar(feed, id="filter")
                yield NewMarker("", id="new-marker")
                with ContentSwitcher(initial="feed", id="feed-area"):
                    yield feed
                    yield ReportView(session, id="report")
                    yield ErrorView("", id="error")
                yield DetailPane(session, id="detail")
        yield Static("", id="status")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.marker.display = False
        self.detail.display = False
        self.filter_bar.display = False
        self.detail.place = self.feed.place
        self.call_after_refresh(lambda: self.feed.focus() if self.switcher.current == "feed" else None)
        self.open_scope(self.first_scope)
        if self.session.poll_interval:  # the feed looks for what is new in its scope, the sidebar in any
            self.set_interval(self.session.poll_interval, self.feed.tick)
            self.set_interval(self.session.poll_interval, self.scopes.tick)

    @property
    def scope(self) -> str | None:
        """The scope the feed shows."""
        return self.feed.scope

    def open_scope(self, scope: str | None, include_history: bool | None = None) -> None:
        """Show a scope from its newest entry (the command palette's and the sidebar's way in)."""
        history = self.feed.include_history if include_history is None else include_history
        self.feed.open(scope, history)
        self.report_view.forget()
        self.activity_panel.clear()
        self.filter_bar.value = ""
        self.filter_bar.display = False
        self.switcher.current = "feed"
        self.scopes.mark_current(scope)
        self._update_bars()

    # -- what the widgets report ------------------------------------------------------------

    @on(FeedView.Opened)
    def feed_opened(self, message: FeedView.Opened) -> None:
        if message.empty:
            self.report_view.load(message.query)
        elif self.switcher.current != "feed":
            self.switcher.current = "feed"
        self.activity_panel.load(self.scope, message.newest, message.oldest)
        if not self.scopes.items:
            self.scopes.load()  # once the feed has painted: the sidebar never delays the first paint

    @on(FeedView.Failed)
    def feed_failed(self, message: FeedView.Failed) -> None:
        self.app.notify(sanitize.line(message.error.message), title="Read failed", severity="error", markup=False)
        if message.blank:
            self.error_view.show_error(message.error, self.session.key_in_env)
            self.switcher.current = "error"
        if not self.scopes.items:
            self.scopes.load()

    @on(FeedView.Arrived)
    def feed_arrived(self, message: FeedView.Arrived) -> None:
        if self.switcher.current == "report" and self.feed.window.row_count:
            self.switcher.current = "feed"
            self.feed.focus()
        self.scopes.arrived(message.entries)  # the counts follow the rows at once (the same rule of what is new)
        if any(ScopeList.key_of(entry.domain) not in self.scopes.items for entry in message.entries):
            self.scopes.load()  # a new domain (or room) appeared: its line and count join the sidebar
        self.activity_panel.reread(self.scope, self.feed.window.newest())
        self._update_bars()

    @on(FeedView.Removed)
    def feed_removed(self, message: FeedView.Removed) -> None:
        if message.reread:
            self.open_scope(self.scope)
            self.app.notify("Removals were dropped unseen (past their retention): the feed was read again.", timeout=5)
            return
        shown = self.detail.display and self.detail.entry is not None and self.detail.entry.atom_id in message.ids
        if shown:  # the pane showed an entry that no longer exists (the focus leaves it, not the filter)
            if self.detail.has_focus_within:
                self.feed.focus()
            self.detail.display = False
        closed = "; its detail was closed" if shown else ""
        if message.ids:  # shown or not, the scope's counts and activity follow removals as they follow arrivals
            self.scopes.removed(message.ids)
            self.scopes.count(fresh=False)
            self.activity_panel.reread(self.scope, self.feed.window.newest())
        if message.count:
            noun = "entry" if message.count == 1 else "entries"
            self.app.notify(f"{message.count} {noun} removed elsewhere{closed}", title="Removed", timeout=5)
        elif shown:  # opened from a search, not a row of the feed
            self.app.notify(f"The entry in the detail pane was removed elsewhere{closed}", title="Removed", timeout=5)

    @on(FeedView.Highlighted)
    @on(FeedView.Selected)
    def entry_moved(self, message: FeedView.Highlighted | FeedView.Selected) -> None:
        if isinstance(message, FeedView.Selected):
            self.detail.display = True
        if self.detail.display:
            self.detail.show(message.entry)

    @on(ReportView.Ready)
    def report_ready(self, message: ReportView.Ready) -> None:
        if message.error is not None:
            self.feed_failed(FeedView.Failed(message.error, True))
        elif not self.feed.window.row_count:
            self.switcher.current = "report"
            if not self.scopes.has_focus:
                # Its unsearched rooms if it lists any, else the sidebar to pick another scope (unless the
                # sidebar is hidden, below 70 columns: keys sent there would go nowhere to be seen).
                rooms = self.report_view.query_one("#report-rooms")
                if rooms.display:
                    rooms.focus()
                elif self.sidebar.display:
                    self.scopes.focus()

    @on(ReportView.RoomChosen)
    @on(OptionList.OptionSelected, "#scopes")
    def scope_chosen(self, message: ReportView.RoomChosen | OptionList.OptionSelected) -> None:
        if isinstance(message, ReportView.RoomChosen):
            self.open_scope(message.address)
        elif (item := self.scopes.items.get(message.option.id or "")) is not None:
            self.open_scope(item.scope)
        self.feed.focus()

    @on(ScopeList.Listed)
    def scopes_listed(self, message: ScopeList.Listed) -> None:
        self.feed.set_room_names({i.scope: i.label for i in message.items if i.kind == "room" and i.scope})
        self.scopes.mark_current(self.scope)
        self._update_bars()

    @on(ScopeList.Marks)
    @on(ScopeList.Restored)
    @on(ScopeList.CaughtUp)
    def watermarks_moved(self, message: ScopeList.Marks | ScopeList.CaughtUp | ScopeList.Restored) -> None:
        if isinstance(message, ScopeList.Marks):
            # The sidebar counted from the consumer's watermark as it is now (a pass elsewhere may have moved
            # it): the feed's `●` follow the same one.
            if self.scope in message.marks and message.marks[self.scope] != self.feed.watermark:
                self.feed.set_watermark(message.marks[self.scope])
                self._update_bars()  # the status line's "since watermark" at the same moment as the marks
            return
        if isinstance(message, ScopeList.Restored):
            self.app.notify("The watermark is back where it was.", title="Undone", timeout=3)
            if message.scope == self.scope:
                self.feed.set_watermark(message.watermark)
            return
        after = message.result.after
        mark = timefmt.to_iso(after.created_at) if after and after.created_at is not None else "none"
        result = message.result
        self.undoable = (message.scope, self.session.consumer, result.before) if result.committed else None
        undo = f"; press u within {UNDO_SECONDS} s to undo" if self.undoable else ""
        self.app.notify(
            f"{result.delivered} new entries read; watermark {mark}{undo}",
            timeout=UNDO_SECONDS,
            title="Marked caught up",
        )
        if self.undoable and not self.session.pin_notices:
            undoable = self.undoable
            self.set_timer(UNDO_SECONDS, lambda: setattr(self, "undoable", None) if self.undoable is undoable else None)
        if message.scope == self.scope:
            self.feed.set_watermark(after)

    # -- keys -------------------------------------------------------------------------------

    def action_close(self) -> None:
        self.detail.display = False
        self.feed.focus()

    def action_filter(self) -> None:
        self.filter_bar.open()

    def action_search(self) -> None:
        self.filter_bar.search("")

    def action_catch_up(self) -> None:
        if self.scopes.catching_up:
            self.app.notify("Already marking caught up …", timeout=2)
            return
        self.scopes.catching_up = True
        self.app.notify(f"Marking {describe_scope(self.scope, sanitize.quoted)} caught up …", timeout=2, markup=False)
        self.scopes.catch_up(self.scope)

    def action_history(self) -> None:
        self.open_scope(self.scope, not self.feed.include_history)

    def action_refresh(self) -> None:
        self.scopes.load()
        self.open_scope(self.scope)

    def action_undo(self) -> None:
        """Put back the watermark the last `c` replaced, exactly (within a few seconds of it)."""
        if self.undoable is None:
            self.app.notify("Nothing to undo: `u` undoes a `c` of the last few seconds.", timeout=3)
            return
        scope, consumer, before = self.undoable
        self.undoable = None
        self.scopes.restore(scope, consumer, before)

    def action_jump(self, number: int) -> None:
        """Open the n-th scope of the sidebar (1 is the own store)."""
        items = list(self.scopes.items.values())
        if number <= len(items):
            self.open_scope(items[number - 1].scope)
            self.feed.focus()

    def action_act(self, name: str) -> None:
        """An action on the entry under the cursor (`w`: on the current scope)."""
        if name == "write":
            self.actions.write(self.scope)
            return
        entry = self.feed.current if self.feed.has_focus or not self.detail.display else self.detail.entry
        if entry is None:
            self.app.notify("No entry here to act on.", timeout=3)
        elif name in ("copy_id", "copy_content"):
            self.actions.copy(entry, "id" if name == "copy_id" else "content")
        else:
            {"page": self.actions.page, "revise": self.actions.revise, "delete": self.actions.delete}[name](entry)

    # -- the title and the status line ------------------------------------------------------

    @on(FeedView.Changed)
    def _update_bars(self) -> None:
        feed, scope = self.feed, self.scope
        if scope is None:
            name = "Own store"
        elif room_of(scope) is None:
            name = f"Domain {scope}"
        elif scope in feed.room_names:
            name = f"Room {feed.room_names[scope]}  ·  {scope}"
        else:
            name = f"Room {scope}"
        self.title_bar.update(plain(name + ("  ·  with history" if feed.include_history else "")))
        self.marker.show_count(len(feed.pending), feed.pending_overflow)
        window, mark = feed.window, feed.watermark
        no_mark = mark is None or mark.created_at is None
        parts = [f"{window.row_count} loaded" + (" (end)" if window.at_end else "")]
        parts.append(f"{self.session.consumer} on {self.session.where}")
        parts.append("● no watermark yet" if no_mark else "● since watermark")
        if feed.include_history:
            parts.append("history shown")
        short = [f"{window.row_count}" + (" (end)" if window.at_end else ""), self.session.consumer]
        short.append("● no mark" if no_mark else "● since mark")
        if feed.include_history:
            short.append("history")
        if feed.first_failed:  # the error view says what happened; nothing retries by itself
            live, brief = "not live", "not live"
        elif feed.live_error:
            live, brief = "live paused", "live paused"
        elif feed.reconnecting:  # the push's stream dropped: nothing is pushed until it is back
            live, brief = "reconnecting…", "reconnecting…"
        else:
            live, brief = ("live (pushed)", "live") if feed.pushing else ("live", "live")
        reason = sanitize.line(feed.live_error) if feed.live_error and not feed.first_failed else None
        line = status_line([*parts, live], [*short, brief], reason, self.size.width - 2)
        self.status.update(plain(line))

    def on_resize(self) -> None:
        self._update_bars()  # the status line's words fit the new width
