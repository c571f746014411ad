"""Provides `FeedReads`: the feed screen's thread workers; each makes one read and posts one message."""

from __future__ import annotations

from collections.abc import Callable

from textual import work
from textual.message import Message
from textual.screen import Screen

from mnemo_tui.errors import MnemoError
from mnemo_tui.model import Entry, RecentQuery
from mnemo_tui.tui import messages as msg
from mnemo_tui.tui import reads
from mnemo_tui.tui.data.live import LiveTracker
from mnemo_tui.tui.data.scopes import ScopeItem
from mnemo_tui.tui.session import Session


class FeedReads(Screen[None]):
    """The I/O half of the feed screen: workers off the event loop; the screen's handlers do the rest."""

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session

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
        session = self.session
        self._deliver(
            lambda: reads.read_page(session.backend, generation, index, query, session.probe),
            lambda error: msg.PageFailed(generation, index, error),
        )

    @work(thread=True, group="feed")
    def load_report(self, generation: int, query: RecentQuery) -> None:
        self._deliver(
            lambda: reads.read_report(self.session.backend, generation, query),
            lambda error: msg.PageFailed(generation, 0, error),
        )

    @work(thread=True, group="activity", exclusive=True)
    def load_activity(self, generation: int, scope: str | None, newest: int | None, oldest: int | None) -> None:
        session = self.session
        self._deliver(lambda: reads.read_activity(session.backend, generation, scope, session.clock(), newest, oldest))

    @work(thread=True, group="state")
    def load_watermark(self, generation: int, scope: str | None) -> None:
        session = self.session
        self._deliver(
            lambda: reads.read_watermark(session.backend, session.state_path, generation, session.consumer, scope)
        )

    @work(thread=True, group="scopes")
    def load_scopes(self) -> None:
        self._deliver(lambda: reads.read_scopes(self.session.backend))

    @work(thread=True, group="counts", exclusive=True)
    def load_counts(self) -> None:
        session = self.session
        items = self.scope_items()

        def count() -> None:
            reads.count_all(session.backend, session.state_path, session.consumer, items, self.post_message)

        self._deliver(count)

    @work(thread=True, group="live")
    def poll(self, generation: int, tracker: LiveTracker, scope: str | None, history: bool) -> None:
        session = self.session
        self._deliver(
            lambda: reads.poll_live(session.backend, generation, tracker, session.probe, scope, history),
            lambda error: msg.LiveFailed(generation, error),
        )

    @work(thread=True, group="detail", exclusive=True)
    def load_chain(self, entry: Entry) -> None:
        self._deliver(lambda: reads.read_chain(self.session.backend, entry))

    @work(thread=True, group="catchup")
    def run_catch_up(self, scope: str | None) -> None:
        session = self.session
        self._deliver(
            lambda: reads.catch_up(session.backend, session.state_path, session.consumer, scope),
            lambda error: msg.CatchUpFailed(scope, error),
        )
