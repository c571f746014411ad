"""Provides the messages thread workers post to the widget that started them, and the one error translation."""

from __future__ import annotations

from textual.message import Message

from mnemo_tui.catchup.walk import LiveBatch
from mnemo_tui.errors import MnemoError
from mnemo_tui.values.model import Page, Watermark
from mnemo_tui.values.removals import Removals


def as_error(exc: BaseException) -> MnemoError:
    """What a read raised, as the project's error: an unexpected exception (a bug) is an internal error."""
    if isinstance(exc, MnemoError):
        return exc
    return MnemoError(f"internal error: {type(exc).__name__}: {exc}")


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


class LiveFound(Read):
    """A poll's (or the push follow's) new entries (None: nothing changed, or their read failed), the removals since the bound when it
    asked (`asked`; None: the backend keeps no tombstones), and what failed (`error`: live is paused)."""

    def __init__(
        self,
        generation: int,
        batch: LiveBatch | None,
        removals: Removals | None = None,
        asked: bool = False,
        error: MnemoError | None = None,
        pushed: bool = False,
    ) -> None:
        super().__init__(generation)
        self.batch = batch
        self.removals = removals
        self.asked = asked
        self.error = error
        self.pushed = pushed  # from the push follow's thread, not a poll (no poll in flight to end)


class PushEnded(Read):
    """The push follow's thread ended: `offered` False when the backend has no push (the feed polls), else
    why it failed (`error`; None when it was closed or the stream ended cleanly)."""

    def __init__(self, generation: int, error: MnemoError | None, offered: bool = True) -> None:
        super().__init__(generation)
        self.error = error
        self.offered = offered


class PushDropped(Read):
    """The push follow's stream ended or dropped (`why`) and it is reconnecting: nothing is pushed until its next event."""

    def __init__(self, generation: int, why: str) -> None:
        super().__init__(generation)
        self.why = why
