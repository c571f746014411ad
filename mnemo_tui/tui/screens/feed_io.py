"""Provides `FeedReads`: the feed screen's thread workers; each makes one read and posts one message."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual import work
from textual.message import Message
from textual.screen import Screen

from mnemo_tui.errors import MnemoError
from mnemo_tui.model import Entry, RecentQuery
from mnemo_tui.tui import messages as msg
from mnemo_tui.tui import reads
from mnemo_tui.tui.data.live import LiveTracker
from mnemo_tui.tui.data.scopes import ScopeItem

if TYPE_CHECKING:
    from mnemo_tui.tui.app import MnemoApp


class FeedReads(Screen[None]):
    """The I/O half of the feed screen: workers off the event loop; the screen's handlers do the rest."""

    @property
    def mnemo(self) -> MnemoApp:
        from mnemo_tui.tui.app import MnemoApp

        assert isinstance(self.app, MnemoApp)
        return self.app

    def scope_items(self) -> list[ScopeItem]:
        """The scopes the sidebar lists (the screen provides them)."""
        raise NotImplementedError

    # -- workers: all I/O happens here, off the event loop --------------------------------

    def _deliver(self, read: Callable[[], Message | None], fail: Callable[[MnemoError], Message] | None = None) -> None:
        """Run one read (in a worker thread) and post its message; a failure becomes a message too, never a crash."""
        try:
            result = read()
        except MnemoError as exc:
            result = fail(exc) if fail is not None else msg.Problem(exc)
        except Exception as exc:  # noqa: BLE001 - a bug in a read must not take the reader's terminal down
            error = MnemoError(f"internal error: {type(exc).__name__}: {exc}")
            result = fail(error) if fail is not None else msg.Problem(error)
        if result is not None:
            self.post_message(result)

    @work(thread=True, group="feed")
    def load_page(self, generation: int, index: int, query: RecentQuery) -> None:
        app = self.mnemo
        self._deliver(
            lambda: reads.read_page(app.backend, generation, index, query, app.probe),
            lambda error: msg.PageFailed(generation, index, error),
        )

    @work(thread=True, group="feed")
    def load_report(self, generation: int, query: RecentQuery) -> None:
        self._deliver(
            lambda: reads.read_report(self.mnemo.backend, generation, query),
            lambda error: msg.PageFailed(generation, 0, error),
        )

    @work(thread=True, group="activity", exclusive=True)
    def load_activity(self, generation: int, scope: str | None, newest: int | None, oldest: int | None) -> None:
        app = self.mnemo
        self._deliver(lambda: reads.read_activity(app.backend, generation, scope, app.clock(), newest, oldest))

    @work(thread=True, group="state")
    def load_watermark(self, generation: int, scope: str | None) -> None:
        app = self.mnemo
        self._deliver(lambda: reads.read_watermark(app.backend, app.state.path, generation, app.consumer, scope))

    @work(thread=True, group="scopes")
    def load_scopes(self) -> None:
        self._deliver(lambda: reads.read_scopes(self.mnemo.backend))

    @work(thread=True, group="counts", exclusive=True)
    def load_counts(self) -> None:
        app = self.mnemo
        items = self.scope_items()

        def count() -> None:
            reads.count_all(app.backend, app.state.path, app.consumer, items, self.post_message)

        self._deliver(count)

    @work(thread=True, group="live")
    def poll(self, generation: int, tracker: LiveTracker, scope: str | None, history: bool) -> None:
        app = self.mnemo
        self._deliver(
            lambda: reads.poll_live(app.backend, generation, tracker, app.probe, scope, history),
            lambda error: msg.LiveFailed(generation, error),
        )

    @work(thread=True, group="detail", exclusive=True)
    def load_chain(self, entry: Entry) -> None:
        self._deliver(lambda: reads.read_chain(self.mnemo.backend, entry))

    @work(thread=True, group="catchup")
    def run_catch_up(self, scope: str | None) -> None:
        app = self.mnemo
        self._deliver(
            lambda: reads.catch_up(app.backend, app.state.path, app.consumer, scope),
            lambda error: msg.CatchUpFailed(scope, error),
        )
