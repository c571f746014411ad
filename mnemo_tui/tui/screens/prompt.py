"""Provides `PromptScreen`: one line of text asked for (enter takes it, escape leaves it)."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Input, Label

from mnemo_tui.tui.plain import plain


class PromptScreen(ModalScreen[str | None]):
    """Asks for one value; what it is now is the placeholder, so typing gives the new one."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "leave", "Back")]

    def __init__(self, question: str, value: str, choices: list[str] | None = None) -> None:
        super().__init__()
        self.question = question
        self.value = value
        # The values that exist (the consumers with a watermark): listed, and completed as one types.
        self.choices = [c for c in choices or [] if c != value]

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt-box"):
            yield Label(plain(self.question), id="prompt-question")
            suggester = SuggestFromList(self.choices, case_sensitive=True) if self.choices else None
            yield Input(placeholder=f"now {self.value}", id="prompt-input", suggester=suggester)
            if self.choices:
                yield Label(plain("or one of: " + ", ".join(self.choices) + " (→ completes)"), id="prompt-choices")
            yield Label("enter takes it · esc leaves it as it is", id="prompt-hint")

    def on_mount(self) -> None:
        field = self.query_one("#prompt-input", Input)
        field.cursor_blink = False
        field.focus()

    @on(Input.Submitted)
    def taken(self, event: Input.Submitted) -> None:
        self.dismiss(event.value or None)

    def action_leave(self) -> None:
        self.dismiss(None)
