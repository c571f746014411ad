"""Provides the sidebar: the scopes with their counts of new entries (and `c`), and the activity picture of one scope."""

from __future__ import annotations

from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.widgets import Label, OptionList, Sparkline
from textual.widgets.option_list import Option

from mnemo_tui import sanitize
from mnemo_tui.catchup.catchup import CatchUp, CatchupResult
from mnemo_tui.catchup.walk import unread
from mnemo_tui.errors import MnemoError
from mnemo_tui.state.statedb import StateDB, StateKey
from mnemo_tui.tui.data import scopes
from mnemo_tui.tui.data.counts import NewEntries
from mnemo_tui.tui.data.errors import as_error
from mnemo_tui.tui.data.scopes import Activity, ScopeItem
from mnemo_tui.tui.session import Session
from mnemo_tui.tui.widgets.rows import fit
from mnemo_tui.values.model import Entry, Watermark

# Against an endpoint (no cheap probe of a change) every scope is counted again every this many live ticks (3 s
# each): the open scope's count follows its feed at once, the others within about 9 s.
REMOTE_TICKS = 3


class ScopeList(OptionList):
    """Own store, its domains and the rooms, each with its count of entries new to this consumer.

    It reads the scopes and their counts itself, and marks a scope caught up (`c`) for the screen.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
    ]

    class Listed(Message):
        """The scopes were (re-)read."""

        def __init__(self, items: list[ScopeItem]) -> None:
            super().__init__()
            self.items = items

    class CaughtUp(Message):
        """A scope was marked caught up (`result.before` is the watermark it had)."""

        def __init__(self, scope: str | None, result: CatchupResult) -> None:
            super().__init__()
            self.scope = scope
            self.result = result

    class Restored(Message):
        """An undo put a scope's watermark back (`watermark` is what it is now)."""

        def __init__(self, scope: str | None, watermark: Watermark | None) -> None:
            super().__init__()
            self.scope = scope
            self.watermark = watermark

    class Failed(Message, bubble=False):
        def __init__(self, title: str, error: MnemoError) -> None:
            super().__init__()
            self.title = title
            self.error = error

    class Marks(Message):
        """The consumer's watermarks were read (for the scopes counted): the feed's `●` follow the same ones."""

        def __init__(self, marks: dict[str | None, Watermark | None]) -> None:
            super().__init__()
            self.marks = marks

    class _Counted(Message, bubble=False):
        def __init__(
            self, run: int, scope: str | None, watermark: Watermark | None, ids: list[str] | None, done: bool = False
        ) -> None:
            super().__init__()
            self.run = run
            self.scope = scope
            self.watermark = watermark
            self.ids = ids  # None: the scope could not be counted (`?`)
            self.done = done  # the count's end (no scope)

    class _Checked(Message, bubble=False):
        def __init__(self, seen: object | None, done: bool = False) -> None:
            super().__init__()
            self.seen = seen  # the store's change token and the watermarks (None: a backend without a token)
            self.done = done  # the timer's look (else a count's own, which it counts from)

    class _Read(Message, bubble=False):
        def __init__(self, items: list[ScopeItem]) -> None:
            super().__init__()
            self.items = items

    def __init__(self, session: Session, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.session = session
        self.items: dict[str, ScopeItem] = {}
        self.counts: dict[str, str] = {}
        self.new = NewEntries(session.overlap)
        self.current: str | None = None
        self.catching_up = False
        self._run = 0  # the latest count
        self._valid = 0  # the first count whose results still hold (older ones counted from what changed)
        self._counting = False
        self._again = False  # the store changed while counting: count once more after
        self._begun: dict[int, int] = {}
        self._seen: object | None = None  # the store's change token and the watermarks the last count read
        self._checking = False
        self._ticks = 0

    @staticmethod
    def key_of(scope: str | None) -> str:
        """The option id of a scope."""
        return ScopeItem(scope, "", "own").key

    # -- reads ------------------------------------------------------------------------------

    @work(thread=True, group="scopes", exit_on_error=False)
    def load(self) -> None:
        """Read the scopes (then their counts)."""
        try:
            self.post_message(self._Read(scopes.list_scopes(self.session.backend)))
        except Exception as exc:  # noqa: BLE001 - a failed read is a notification, never a closed app
            self.post_message(self.Failed("Could not list scopes", as_error(exc)))

    @on(_Read)
    def _read(self, message: _Read) -> None:
        self.show_scopes(message.items, self.current_scope)
        for item in message.items:
            if item.key not in self.counts:
                self.set_count(item.scope, "…")
        self.count()
        self.post_message(self.Listed(message.items))

    def count(self, fresh: bool = True) -> None:
        """Count each scope's new entries again from this consumer's watermark (each posted as it is known).

        `fresh`: what the counts start from changed (a `c`, an undo, another consumer, the scopes read
        again), so a count in flight is dropped. Otherwise (the store changed) a count in flight is
        followed by one more: under a steady stream of writes each count still lands.
        """
        if not fresh and self._counting:
            self._again = True
            return
        self._run += 1
        if fresh:
            self._valid = self._run
        self._counting = True
        self._begun[self._run] = self.new.begin()
        self._count(self._run, list(self.items.values()))

    @work(thread=True, group="counts", exit_on_error=False)
    def _count(self, run: int, items: list[ScopeItem]) -> None:
        session = self.session
        backend, overlap = session.backend, session.overlap
        try:
            seen = self._look()
            state = StateDB(session.state_path)
        except Exception as exc:  # noqa: BLE001 - the counts stay as they were, and the reader is told
            self.post_message(self._Counted(run, None, None, None, done=True))
            self.post_message(self.Failed("Could not read the watermarks", as_error(exc)))
            return
        self.post_message(self._Checked(seen))
        try:
            for item in items:
                try:
                    mark = scopes.load_watermark(session.watermarks(state), backend, session.consumer, item.scope)
                    found = scopes.new_ids(backend, unread(mark, overlap), item.scope)
                    self.post_message(self._Counted(run, item.scope, mark, found))
                except Exception:  # noqa: BLE001 - one scope's failure is its `?`; the others still count
                    self.post_message(self._Counted(run, item.scope, None, None))
        finally:
            state.close()
            self.post_message(self._Counted(run, None, None, None, done=True))

    def _look(self) -> object | None:
        """What the counts depend on, read cheaply (in a worker): the store's change token and this consumer's
        watermarks on this backend. None on an endpoint, which has no such token."""
        session = self.session
        token = session.probe()
        if token is None:
            return None
        state = StateDB(session.state_path)
        try:
            backend = session.backend
            marks = [w for w in state.list(backend.identity, backend.principal) if w.consumer == session.consumer]
        finally:
            state.close()
        return (token, session.consumer, tuple(marks))

    def tick(self) -> None:
        """The live timer: count again when anything the counts depend on changed (a write or a pass of another
        process, in any scope); on a backend without a change token (an endpoint), every `REMOTE_TICKS` ticks."""
        if not self.items or self._checking:
            return
        self._ticks += 1
        self._checking = True
        self._check(self._seen)

    @work(thread=True, group="check", exit_on_error=False)
    def _check(self, before: object | None) -> None:
        try:
            seen = self._look()
        except Exception:  # noqa: BLE001 - the next tick looks again
            seen = before
        self.post_message(self._Checked(seen, done=True))

    @on(_Checked)
    def _checked(self, message: _Checked) -> None:
        if not message.done:  # what a count reads first: what it counts from
            self._seen = message.seen
            return
        self._checking = False
        if message.seen is None:
            if self._ticks % REMOTE_TICKS == 0:
                self.count(fresh=False)
        elif message.seen != self._seen:
            self.count(fresh=False)

    @on(_Counted)
    def _counted(self, message: _Counted) -> None:
        if message.done:
            self._begun.pop(message.run, None)
            if message.run == self._run:
                self._counting = False
                if self._again:
                    self._again = False
                    self.count(fresh=False)
            return
        if message.run < self._valid:
            return
        if message.ids is None:
            self.set_count(message.scope, "?")
            return
        self.new.counted(message.scope, message.watermark, message.ids, self._begun.get(message.run, 0))
        self.set_count(message.scope, self.new.shown(message.scope))
        self.post_message(self.Marks({message.scope: message.watermark}))

    def arrived(self, entries: list[Entry]) -> None:
        """Entries the feed shows arriving: they join the counts of the scopes they belong to at once."""
        for scope in self.new.arrived(entries):
            self.set_count(scope, self.new.shown(scope))

    def removed(self, ids: set[str]) -> None:
        """Entries removed: they leave the counts at once."""
        for scope in self.new.removed(ids):
            self.set_count(scope, self.new.shown(scope))

    @work(thread=True, group="catchup", exit_on_error=False)
    def catch_up(self, scope: str | None) -> None:
        """Mark a scope caught up exactly as `mnemo catchup` does: the same walk and commit, output discarded."""
        session = self.session
        try:
            state = StateDB(session.state_path)
            try:
                walk = CatchUp(session.backend, session.watermarks(state), consumer=session.consumer, scope=scope)
                self.post_message(self.CaughtUp(scope, walk.run(lambda entries: None, commit=True)))
            finally:
                state.close()
        except Exception as exc:  # noqa: BLE001 - a failed pass commits nothing and says so
            self.post_message(self.Failed("Could not mark caught up", as_error(exc)))

    @work(thread=True, group="catchup", exit_on_error=False)
    def restore(self, scope: str | None, consumer: str, before: Watermark | None) -> None:
        """Undo a `c`: put back the watermark it replaced, exactly (none: forget the one it made)."""
        session = self.session
        try:
            state = StateDB(session.state_path)
            try:
                key = StateKey.of(session.backend, consumer, scope)
                kept = session.watermarks(state)
                if before is None or before.created_at is None:
                    kept.reset(key)
                    back = None
                else:
                    back = kept.commit(key, before.created_at, before.boundary_ids, force=True)
            finally:
                state.close()
        except Exception as exc:  # noqa: BLE001 - the watermark stays where `c` put it, and the reader is told
            self.post_message(self.Failed("Could not undo", as_error(exc)))
            return
        self.post_message(self.Restored(scope, back))

    @on(CaughtUp)
    @on(Restored)
    def _caught_up(self) -> None:
        self.catching_up = False
        self.count()

    @on(Failed)
    def _failed(self, message: Failed) -> None:
        self.catching_up = False
        self.app.notify(sanitize.line(message.error.message), title=message.title, severity="error", markup=False)

    # -- drawing ----------------------------------------------------------------------------

    @property
    def current_scope(self) -> str | None:
        item = self.items.get(self.current or "")
        return item.scope if item is not None else None

    def show_scopes(self, items: list[ScopeItem], current: str | None) -> None:
        """Replace the list; keep the current scope highlighted."""
        self.items = {item.key: item for item in items}
        self.current = self.key_of(current)
        self._redraw()

    def _redraw(self) -> None:
        options: list[Option | None] = []
        rooms_started = False
        for item in self.items.values():
            if item.kind == "room" and not rooms_started:
                rooms_started = True
                options.append(None)
                options.append(Option(Content.styled("Rooms", "bold $text-muted"), disabled=True))
            options.append(Option(self._prompt(item), id=item.key))
        if not rooms_started:
            options.append(None)
            options.append(Option(Content.styled("No rooms joined", "italic $text-muted"), disabled=True))
        highlighted = self.highlighted
        self.set_options(options)
        if self.current in self.items:
            self.highlighted = self.get_option_index(self.current)
        elif highlighted is not None and highlighted < self.option_count:
            self.highlighted = highlighted

    def on_resize(self) -> None:
        if self.items:
            self._redraw()  # names are cut to the width the sidebar has now

    def watch_show_vertical_scrollbar(self, shown: bool) -> None:
        # A scrollbar coming or going changes the width names are cut to, without a resize.
        if self.items:
            self.call_after_refresh(self._redraw)

    def mark_current(self, scope: str | None) -> None:
        """Show which scope the feed is on."""
        previous = self.current
        self.current = self.key_of(scope)
        for key in (previous, self.current):
            if key in self.items:
                self.replace_option_prompt(key, self._prompt(self.items[key]))
        if self.current in self.items:
            self.highlighted = self.get_option_index(self.current)

    def set_count(self, scope: str | None, shown: str) -> None:
        """Show a scope's count of new entries (`12`, `99+`, `…` while counting, blank for none)."""
        key = self.key_of(scope)
        self.counts[key] = shown
        if key in self.items:
            self.replace_option_prompt(key, self._prompt(self.items[key]))

    def _prompt(self, item: ScopeItem) -> Content:
        marker = "▶ " if item.key == self.current else "  "
        indent = "  " if item.kind == "domain" else ""
        count = self.counts.get(item.key, "")
        width = max(self.scrollable_content_region.width, 16)
        name = fit(indent + sanitize.line(item.label), width - 2 - 4)
        counted = count and count != "…" and count != "?"
        return Content.assemble(
            (marker, "bold $accent"),
            (name, "bold" if item.kind == "own" else ""),
            (count.rjust(4), "bold $accent" if counted else "$text-muted"),
        )


class ActivityPanel(Vertical):
    """Entries over time of the selected scope, as a sparkline (log scale) with its span and peak."""

    class _Read(Message, bubble=False):
        def __init__(self, token: int, activity: Activity) -> None:
            super().__init__()
            self.token = token
            self.activity = activity

    def __init__(self, session: Session, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.session = session
        self.activity: Activity | None = None
        self._token = 0
        self._bucket: int | None = None  # the width the scope's pace gave when it was opened

    def compose(self) -> ComposeResult:
        yield Label("Activity", id="activity-title")
        yield Sparkline([], id="activity-spark")
        yield Label("", id="activity-caption")

    def load(self, scope: str | None, newest: int | None, oldest: int | None) -> None:
        """Read a scope's activity (what the feed's first page spans sets the pace)."""
        self._token += 1
        self._bucket = scopes.bucket_width(newest, oldest)
        self._read(self._token, scope, newest, self._bucket)

    def reread(self, scope: str | None, newest: Entry | None) -> None:
        """Read it again after entries arrived or were removed (`newest`: the feed's newest now), in the buckets
        the scope was opened with (a width read again from the newest entry would widen with every arrival)."""
        self._token += 1
        self._read(self._token, scope, newest.created_at if newest else None, self._bucket)

    def clear(self) -> None:
        """A scope is being opened: its picture is not known yet (a late one for the old scope is dropped)."""
        self._token += 1
        self._bucket = None
        self.show(None)

    @work(thread=True, group="activity", exclusive=True, exit_on_error=False)
    def _read(self, token: int, scope: str | None, newest: int | None, bucket: int | None) -> None:
        session = self.session
        try:
            found = scopes.activity(session.backend, scope, session.clock(), newest, None, bucket)
        except Exception:  # noqa: BLE001 - the picture is a glance: without it the panel says so, nothing else
            return
        self.post_message(self._Read(token, found))

    @on(_Read)
    def _loaded(self, message: _Read) -> None:
        if message.token == self._token:
            self.show(message.activity)

    def show(self, activity: Activity | None) -> None:
        """Show one scope's activity (None while it is being read)."""
        self.activity = activity
        spark = self.query_one("#activity-spark", Sparkline)
        caption = self.query_one("#activity-caption", Label)
        if activity is None:
            spark.data = []
            caption.update("…")
            return
        spark.data = activity.heights
        peak = max(activity.counts, default=0)
        total = sum(activity.counts)
        more = "+" if activity.capped else ""
        # Short lines, so the caption stays whole in the narrowest sidebar (16 cells of text).
        noun = "entry" if total == 1 and not more else "entries"
        caption.update(f"{activity.label}\n{total:,}{more} {noun}\npeak {peak}{more}/{activity.unit}")
