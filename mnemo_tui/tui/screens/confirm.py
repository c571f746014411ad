"""Provides `ConfirmScreen`: a yes/no question (`y` yes; `n`, escape or anything else no)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.events import Key
from textual.screen import ModalScreen
from textual.widgets import Label

from mnemo_tui.tui.plain import plain_block


class ConfirmScreen(ModalScreen[bool]):
    """Asks before something that cannot be undone; as `mnemo delete` on a terminal, only `y` says yes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str, hint: str = "y deletes · any other key keeps it") -> None:
        super().__init__()
        self.question = question
        self.hint = hint

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            yield Label(plain_block(self.question), id="confirm-question")
            yield Label(self.hint, id="confirm-hint")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    def on_key(self, event: Key) -> None:
        if event.key not in ("y", "n", "escape"):
            event.stop()
            self.dismiss(False)
