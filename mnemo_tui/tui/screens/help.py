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
    ("j k ↓ ↑  g G", "move / the newest (and the new ones held), the last loaded"),
    ("ctrl+d ctrl+u", "half a page; ctrl+f ctrl+b, PgDn PgUp, space: a page"),
    ("enter  escape", "open the entry whole / close the detail pane"),
    ("tab  b  1..9", "scopes and feed / show or hide the sidebar / open scope n"),
    ("/  ctrl+o", "filter as you type; enter searches / by best or newest"),
    ("y  Y", "copy the short id / the content (OSC 52)"),
    ("o  e  w  d", "open in $PAGER / revise in $EDITOR / write / delete"),
    ("c  u", "mark caught up, as mnemo catchup / undo it (10 s)"),
    ("v  r", "show superseded revisions / refresh, retry"),
    ("ctrl+p  ?  q", "palette (scopes, consumer, all) / help / quit, ctrl+c"),
)

MARKS: tuple[tuple[str, str], ...] = (
    ("●", "newer than your consumer's watermark; the sidebar counts them"),
    ("12  99+", "new since that scope's own watermark, as mnemo catchup"),
    ("superseded →", "an old revision (history shown) and the id that replaced it"),
    ("▲ N new", "new entries held while you read further down: g shows them"),
)


def help_text() -> Content:
    """The keys and the marks as two aligned columns."""
    lines = [Content.styled("mnemo — keys", "bold $accent"), Content("")]
    for key, does in KEYS:
        lines.append(Content.assemble((f"{key:<15}", "bold"), does))
    lines += [Content(""), Content.styled("Marks", "bold $accent")]
    for mark, means in MARKS:
        lines.append(Content.assemble((f"{mark:<15}", "bold"), means))
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
