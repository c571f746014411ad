"""Provides `FilterBar`: `/` narrows the loaded feed as you type; enter asks the server the same words."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.binding import Binding, BindingType
from textual.widgets import Input

from mnemo_tui.tui.screens.search import SearchScreen
from mnemo_tui.tui.widgets.feed import FeedView
from mnemo_tui.values.model import Entry


class FilterBar(Input):
    """A one-line filter over the feed: each keystroke re-filters the loaded rows (as lazygit and k9s do)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "clear", "Clear the filter", show=False),
        Binding("down", "to_feed", "To the rows", show=False),
    ]

    def __init__(self, feed: FeedView, *, id: str | None = None) -> None:
        super().__init__(placeholder="filter the loaded entries · enter searches the scope · esc clears", id=id)
        self.feed = feed
        self.cursor_blink = False

    def open(self) -> None:
        """Show the bar and type into it (what was typed before is kept)."""
        self.display = True
        self.focus()

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        event.stop()
        self.feed.set_filter(event.value)

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.value.strip():
            self.search(event.value.strip())

    def search(self, words: str) -> None:
        """Search the feed's scope on the server (`mnemo search`); a hit chosen opens in the detail pane."""
        feed = self.feed

        def opened(entry: Entry | None) -> None:
            if entry is not None:
                feed.post_message(FeedView.Selected(entry))

        screen = SearchScreen(feed.session, feed.scope, feed.include_history, feed.removals_seen, words)
        self.app.push_screen(screen, opened)

    def action_clear(self) -> None:
        self.value = ""
        self.feed.set_filter("")
        self.display = False
        self.feed.focus()

    def action_to_feed(self) -> None:
        self.feed.focus()
