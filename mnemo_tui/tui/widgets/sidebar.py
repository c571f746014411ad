"""Provides the sidebar: the scope list with counts of new entries, and the activity picture of one scope."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Label, OptionList, Sparkline
from textual.widgets.option_list import Option

from mnemo_tui import text
from mnemo_tui.tui.data.scopes import Activity, ScopeItem

NAME_WIDTH = 20


class ScopeList(OptionList):
    """Own store, its domains and the rooms, each with its count of entries new to this consumer."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.items: dict[str, ScopeItem] = {}
        self.counts: dict[str, str] = {}
        self.current: str | None = None

    def show_scopes(self, items: list[ScopeItem], current: str | None) -> None:
        """Replace the list; keep the current scope highlighted."""
        self.items = {item.key: item for item in items}
        self.current = ScopeItem(current, "", "own").key
        options: list[Option | None] = []
        rooms_started = False
        for item in items:
            if item.kind == "room" and not rooms_started:
                rooms_started = True
                options.append(None)
                options.append(Option(Content.styled("Rooms", "bold $text-muted"), disabled=True))
            options.append(Option(self._prompt(item), id=item.key))
        if not rooms_started:
            options.append(None)
            options.append(Option(Content.styled("No rooms joined", "italic $text-muted"), disabled=True))
        self.set_options(options)
        if self.current in self.items:
            self.highlighted = self.get_option_index(self.current)

    def mark_current(self, scope: str | None) -> None:
        """Show which scope the feed is on."""
        previous = self.current
        self.current = ScopeItem(scope, "", "own").key
        for key in (previous, self.current):
            if key in self.items:
                self.replace_option_prompt(key, self._prompt(self.items[key]))
        if self.current in self.items:
            self.highlighted = self.get_option_index(self.current)

    def set_count(self, scope: str | None, text: str) -> None:
        """Show a scope's count of new entries (`12`, `99+`, `…` while counting, blank for none)."""
        key = ScopeItem(scope, "", "own").key
        self.counts[key] = text
        if key in self.items:
            self.replace_option_prompt(key, self._prompt(self.items[key]))

    def _prompt(self, item: ScopeItem) -> Content:
        marker = "▶ " if item.key == self.current else "  "
        indent = "  " if item.kind == "domain" else ""
        name = (indent + text.line(item.label))[:NAME_WIDTH]
        count = self.counts.get(item.key, "")
        return Content.assemble(
            (marker, "bold $accent"),
            (name.ljust(NAME_WIDTH), "bold" if item.kind == "own" else ""),
            (count.rjust(4), "bold $accent" if count and count != "…" else "$text-muted"),
        )


class ActivityPanel(Vertical):
    """Entries over time of the selected scope, as a sparkline with its span and peak."""

    def compose(self) -> ComposeResult:
        yield Label("Activity", id="activity-title")
        yield Sparkline([], id="activity-spark")
        yield Label("", id="activity-caption")

    def show(self, activity: Activity | None) -> None:
        """Show one scope's activity (None while it is being read)."""
        spark = self.query_one("#activity-spark", Sparkline)
        caption = self.query_one("#activity-caption", Label)
        if activity is None:
            spark.data = []
            caption.update("…")
            return
        spark.data = [float(c) for c in activity.counts]
        peak = max(activity.counts, default=0)
        total = sum(activity.counts)
        more = "+" if activity.capped else ""
        unit = "hour" if activity.label.endswith("hour") else "day"
        caption.update(f"{activity.label}\n{total}{more} entries, peak {peak}{more}/{unit}")
