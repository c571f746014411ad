"""Provides the messages thread workers post to the widget that started them, and the question asked of the app."""

from __future__ import annotations

from collections.abc import Callable

from textual.message import Message

from mnemo_tui.errors import MnemoError
from mnemo_tui.tui.data.live import LiveNews
from mnemo_tui.values.model import Page, Watermark


class ConfirmAsked(Message):
    """A yes-or-no question for the app to ask in its dialog (`answered` gets True for yes, else False or None):
    what is not a screen opens none itself."""

    def __init__(self, question: str, answered: Callable[[bool | None], None]) -> None:
        super().__init__()
        self.question = question
        self.answered = answered


class Read(Message, bubble=False):
    """A worker's result for one generation of the feed (a scope, a history setting, a refresh)."""

    def __init__(self, generation: int) -> None:
        super().__init__()
        self.generation = generation


class PageLoaded(Read):
    """A page of the walk, read for its index; `token` is the change probe taken before the first page."""

    def __init__(self, generation: int, index: int, page: Page, token: tuple[int, int] | None) -> None:
        super().__init__(generation)
        self.index = index
        self.page = page
        self.token = token


class PageFailed(Read):
    def __init__(self, generation: int, index: int, error: MnemoError) -> None:
        super().__init__(generation)
        self.index = index
        self.error = error


class WatermarkLoaded(Read):
    def __init__(self, generation: int, watermark: Watermark | None) -> None:
        super().__init__(generation)
        self.watermark = watermark


class Live(Message, bubble=False):
    """What a live poll or the push follow's thread found (`tui.data.live`), for the feed that asked."""

    def __init__(self, news: LiveNews) -> None:
        super().__init__()
        self.news = news
