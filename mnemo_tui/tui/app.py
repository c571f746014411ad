"""Provides `MnemoApp`: the Textual app, wired to an injected backend, state database and clock."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import ClassVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen

from mnemo_tui import timefmt
from mnemo_tui.backends import Backend
from mnemo_tui.model import MAX_LIMIT
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.tui.data.serial import SerialBackend
from mnemo_tui.tui.plain import palette
from mnemo_tui.tui.screens.help import HelpScreen
from mnemo_tui.tui.screens.main import FeedScreen
from mnemo_tui.tui.session import Session

# An embedded store is probed (one PRAGMA) twice a second; an endpoint is polled every few seconds.
EMBEDDED_POLL = 0.5
REMOTE_POLL = 3.0


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
        )
        self.first_scope = scope
        self.failure: BaseException | None = None

    def _handle_exception(self, error: Exception) -> None:
        """An unhandled exception: keep it for `mnemo tui` to report, and exit without Textual's traceback.

        Textual's own (`_fatal_error`) prints a pretty traceback with local variables, which may
        hold entry text or keys, and lets the process exit 0. Here the app only records the error
        and closes; cli/cmd_tui.py turns it into exit 5 with one line (the traceback with --debug).
        """
        self._return_code = 1
        if self.failure is None:
            self.failure = error
        if self._exception is None:  # what a pilot test re-raises
            self._exception = error
            self._exception_event.set()
        self._close_messages_no_wait()

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
        yield from super().get_system_commands(screen)
        try:
            feed = self.feed_screen
        except LookupError:
            return
        yield SystemCommand(
            "Mark caught up", "Commit this scope's watermark, as `mnemo catchup` does", feed.action_catch_up
        )
        yield SystemCommand("Search", "Search the current scope", feed.action_search)
        yield SystemCommand("Toggle history", "Show or hide superseded revisions", feed.action_history)
        yield SystemCommand("Refresh", "Re-read scopes, counts and the feed", feed.action_refresh)
        yield SystemCommand("Help", "The keys", self.action_help)
        for item in feed.scopes.items.values():
            where = "own store" if item.scope is None else palette(item.scope)
            yield SystemCommand(
                f"Open {palette(item.label)}", f"Switch the feed to {where}", partial(feed.open_scope, item.scope)
            )
