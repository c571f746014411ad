"""Provides `MnemoApp`: the Textual app, wired to an injected backend, state database and clock."""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import ClassVar

import platformdirs
from rich.console import Console
from textual import on
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.notifications import SeverityLevel
from textual.screen import Screen

from mnemo_tui import sanitize, timefmt
from mnemo_tui.backends import Backend
from mnemo_tui.errors import MnemoError
from mnemo_tui.limits import MAX_LIMIT, check_consumer
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.tui.data.serial import SerialBackend
from mnemo_tui.tui.messages import ConfirmAsked
from mnemo_tui.tui.plain import palette
from mnemo_tui.tui.screens.confirm import ConfirmScreen
from mnemo_tui.tui.screens.help import HelpScreen
from mnemo_tui.tui.screens.main import FeedScreen
from mnemo_tui.tui.screens.prompt import PromptScreen
from mnemo_tui.tui.screens.search import SearchScreen
from mnemo_tui.tui.session import Session
from mnemo_tui.tui.widgets.feed import FeedView
from mnemo_tui.tui.widgets.filter import FilterBar
from mnemo_tui.values.model import Entry

# An embedded store is probed (one PRAGMA) twice a second; an endpoint is polled every few seconds.
EMBEDDED_POLL = 0.5
REMOTE_POLL = 3.0
# A pinned toast (`Session.pin_notices`) lasts an hour: for a test, until the app closes.
PINNED_SECONDS = 3600.0


class MnemoApp(App[None]):
    """A live catch-up feed over any `Backend`.

    Args:
        backend: what to read; the embedded store or an endpoint (the app does not close it).
        state: the state database holding this consumer's watermarks.
        consumer: whose watermarks the counts and `c` use.
        scope: the scope to open first (None: the own store).
        clock: the current time in microseconds (tests fix it).
        poll_interval: seconds between live checks; None for none (tests poll by hand); 0 for the default.
        page_size: entries per page read (1–100).
        keep_pages: pages held besides the first one.
    """

    CSS_PATH = "mnemo.tcss"
    TITLE = "mnemo"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        # Ctrl-C quits at once, from any screen or field (as lazygit and k9s), instead of Textual's notice.
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("question_mark", "help", "Help"),
    ]

    def __init__(
        self,
        backend: Backend,
        state: StateDB,
        *,
        consumer: str = "default",
        scope: str | None = None,
        clock: Callable[[], int] = timefmt.now_us,
        poll_interval: float | None = 0,
        page_size: int = MAX_LIMIT,
        keep_pages: int = 8,
        pin_notices: bool = False,
    ) -> None:
        super().__init__()
        if poll_interval == 0:
            poll_interval = REMOTE_POLL if backend.kind == "remote" else EMBEDDED_POLL
        self.session = Session(
            backend=SerialBackend(backend),
            state_path=state.path,
            consumer=consumer,
            clock=clock,
            poll_interval=poll_interval,
            page_size=page_size,
            keep_pages=keep_pages,
            pin_notices=pin_notices,
            # The settings read MNEMO_API_KEY from this process's environment, first (`credentials.lookup_key`).
            key_in_env=backend.kind == "remote" and bool(os.environ.get("MNEMO_API_KEY", "").strip()),
        )
        self.first_scope = scope
        self.failure: BaseException | None = None
        # Textual prints only failures there, after the app closed: `mnemo tui` says them in its own line.
        self.error_console = Console(file=io.StringIO(), markup=False, highlight=False)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Textual's toast, held for the app's life when the notices are pinned."""
        if self.session.pin_notices:
            timeout = PINNED_SECONDS
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def _handle_exception(self, error: Exception) -> None:
        # Textual's one hook for an unhandled exception: it has none public (textual#2818), so only this name is reached.
        """An unhandled exception: keep it for `mnemo tui` to report, then let Textual close the app its own way.

        Textual sets the exit code (1, read back as `App.return_code`), keeps the error for a pilot
        test to raise, and closes the app; its pretty traceback, with local variables that may hold
        entry text or keys, goes to `error_console`, which here writes nowhere. cli/cmd_tui.py turns
        the failure into exit 5 with one line (a plain traceback with --debug).
        """
        if self.failure is None:
            self.failure = error
        super()._handle_exception(error)

    def bell(self) -> None:
        """The terminal's bell, but not for a failure: Textual rings it then, and `mnemo tui` says it in one line."""
        if self.failure is None:
            super().bell()

    # -- the dialogs the widgets and the actions ask for (what is not a screen or the app opens none) ----

    @on(FilterBar.SearchAsked)
    def search_asked(self, message: FilterBar.SearchAsked) -> None:
        """Search the feed's scope on the server (`mnemo search`); a hit chosen opens in the detail pane."""
        feed = self.feed_screen.feed

        def opened(entry: Entry | None) -> None:
            if entry is not None:
                feed.post_message(FeedView.Selected(entry))

        words = message.words
        self.push_screen(
            SearchScreen(self.session, feed.scope, feed.include_history, feed.removals_seen, words), opened
        )

    @on(ConfirmAsked)
    def confirm_asked(self, message: ConfirmAsked) -> None:
        self.push_screen(ConfirmScreen(message.question), message.answered)

    def get_default_screen(self) -> Screen[None]:
        return FeedScreen(self.session, self.first_scope)

    @property
    def feed_screen(self) -> FeedScreen:
        """The main screen (under any dialog)."""
        for screen in self.screen_stack:
            if isinstance(screen, FeedScreen):
                return screen
        raise LookupError("no feed screen")

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        # Each command once: Textual's "Keys" panel is our "Help"; its "Screenshot" is ours (below).
        for command in super().get_system_commands(screen):
            if command.title not in ("Keys", "Screenshot"):
                yield command
        yield SystemCommand("Help", "The keys and the marks", self.action_help)
        yield SystemCommand("Screenshot", "Save an SVG picture of the screen", self._picture_once_shown)
        try:
            feed = self.feed_screen
        except LookupError:
            return
        yield SystemCommand(
            "Mark caught up", "Commit this scope's watermark, as `mnemo catchup` does", feed.action_catch_up
        )
        yield SystemCommand("Search", "Search the current scope on the backend", feed.action_search)
        yield SystemCommand("Toggle history", "Show or hide superseded revisions", feed.action_history)
        yield SystemCommand("Refresh", "Re-read scopes, counts and the feed", feed.action_refresh)
        yield SystemCommand(
            "Switch consumer", f"Read as another consumer (now {palette(self.session.consumer)})", self.switch_consumer
        )
        for item in feed.scopes.items.values():
            where = "own store" if item.scope is None else palette(item.scope)
            yield SystemCommand(
                f"Open {palette(item.label)}", f"Switch the feed to {where}", partial(feed.open_scope, item.scope)
            )

    def switch_consumer(self) -> None:
        """Ask for a consumer name; its watermarks then drive the counts, the marks and `c`."""

        def chosen(name: str | None) -> None:
            if name is None or name == self.session.consumer:
                return
            try:
                self.session.consumer = check_consumer(name)
            except MnemoError as exc:
                self.notify(sanitize.line(exc.message), title="Consumer unchanged", severity="error", markup=False)
                return
            self.feed_screen.action_refresh()
            self.notify(f"Reading as consumer {sanitize.line(name)}", title="Consumer", markup=False)

        self.push_screen(PromptScreen("Read as consumer:", self.session.consumer, self._consumers()), chosen)

    def _consumers(self) -> list[str]:
        """The consumers with a watermark on this backend, as this principal (none if the state cannot be read)."""
        from mnemo_tui.state.statedb import StateDB

        backend = self.session.backend
        try:
            db = StateDB(self.session.state_path)
        except MnemoError:
            return []
        try:
            return sorted({w.consumer for w in db.list(backend.identity, backend.principal)})
        except MnemoError:
            return []
        finally:
            db.close()

    def _picture_once_shown(self, tries: int = 0) -> None:
        """The palette's screenshot, taken once the screen under it shows its own keys again: its footer
        redraws them after the palette hands the focus back, so the picture waits for that (bounded)."""
        if tries < 100 and not self._footer_drawn():
            self.call_after_refresh(self._picture_once_shown, tries + 1)
            return
        self.call_after_refresh(self.save_picture)

    def _footer_drawn(self) -> bool:
        """Whether the current screen has its focus back and its footer shows a key for each binding it shows."""
        from textual.widgets import Footer

        screen = self.screen
        footers = list(screen.query(Footer))
        if screen.focused is None or not footers:
            return False
        # A key counts once it is laid out (a region on the screen), not merely mounted.
        shown = {getattr(key, "action", None) for footer in footers for key in footer.query("*") if key.region}
        return all(b.binding.action in shown for b in screen.active_bindings.values() if b.binding.show)

    def save_picture(self) -> None:
        """Save a screenshot where it can be found: the Downloads folder if there is one, else Pictures, else
        a `screenshots` folder beside the state database (never the current folder: often a git checkout)."""
        for candidate in (platformdirs.user_downloads_dir(), platformdirs.user_pictures_dir()):
            folder = Path(candidate)
            if folder.is_dir():
                break
        else:
            folder = self.session.state_path.parent / "screenshots"
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            saved = self.save_screenshot(path=str(folder))
        except OSError as exc:
            self.notify(sanitize.line(str(exc)), title="No screenshot", severity="error", markup=False)
            return
        self.notify(sanitize.line(saved), title="Screenshot saved", markup=False)
