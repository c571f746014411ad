"""Provides `HelpScreen`: the keys, in one place (`?`)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP = """\
# mnemo — keys

| key | does |
| --- | --- |
| j k ↓ ↑ | next / previous entry (or scope, in the sidebar) |
| g G | newest entry (and the new ones held) / last row loaded |
| enter | open the entry: content, provenance, concepts, revisions |
| escape | close the detail pane |
| tab | move between the scopes and the feed |
| / | search the current scope |
| c | mark this scope caught up, as the catchup command does |
| h | show or hide superseded revisions |
| r | refresh scopes, counts and feed; retry after an error |
| ctrl+p | command palette: switch scope, every action |
| ? | this help |
| q | quit |

A `●` marks entries newer than your consumer's watermark. The sidebar counts them per scope
(up to 99+). New entries appear on top while you are at the top of the feed; when you have
scrolled away, a "N new" marker waits for you instead.
"""


class HelpScreen(ModalScreen[None]):
    """The keys and what the markers mean."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Markdown(HELP, id="help-text")
