"""Provides `HelpScreen`: the keys and the marks, in one place (`?`); it fits 80×24 and scrolls where it does not."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS: tuple[tuple[str, str], ...] = (
    ("j k ↓ ↑", "next / previous entry (or scope, in the sidebar)"),
    ("g G", "newest entry (and the new ones held) / last row loaded"),
    ("enter", "open the entry: content, provenance, revisions, changes"),
    ("escape", "close the detail pane"),
    ("tab  b", "move between the scopes and the feed / show or hide them"),
    ("/", "search the current scope"),
    ("c", "mark this scope caught up, as the catchup command does"),
    ("h", "show or hide superseded revisions"),
    ("r", "refresh scopes, counts and feed; retry after an error"),
    ("ctrl+p", "command palette: switch scope, every action"),
    ("?  q", "this help / quit"),
)

MARKS: tuple[tuple[str, str], ...] = (
    ("●", "newer than your consumer's watermark; the sidebar counts them"),
    ("12↑", "a domain counted from the own store's watermark, the later one"),
    ("superseded →", "an old revision (history shown) and the id that replaced it"),
    ("▲ N new", "new entries held while you read further down: g shows them"),
)


def help_text() -> Content:
    """The keys and the marks as two aligned columns."""
    lines = [Content.styled("mnemo — keys", "bold $accent"), Content("")]
    for key, does in KEYS:
        lines.append(Content.assemble((f"{key:<13}", "bold"), does))
    lines += [Content(""), Content.styled("Marks", "bold $accent")]
    for mark, means in MARKS:
        lines.append(Content.assemble((f"{mark:<13}", "bold"), means))
    lines += [
        Content(""),
        Content.styled("Ids are the 8 characters `mnemo show` and `mnemo delete` take.", "$text-muted"),
    ]
    return Content("\n").join(lines)


class HelpScreen(ModalScreen[None]):
    """The keys and what the marks mean."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(help_text(), id="help-text")

    def on_mount(self) -> None:
        self.query_one("#help-box").focus()  # arrows and page keys scroll it where it does not fit
