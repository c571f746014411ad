"""Provides the messages workers post back to the screen: each carries the generation it was read for."""

from __future__ import annotations

from textual.message import Message

from mnemo_tui.catchup import CatchupResult
from mnemo_tui.errors import MnemoError
from mnemo_tui.model import EmptyReport, Page, Watermark
from mnemo_tui.tui.data.chain import Chain
from mnemo_tui.tui.data.live import LiveBatch
from mnemo_tui.tui.data.scopes import Activity, ScopeItem


class Loaded(Message):
    """A worker's result for one generation of the feed (a scope, a history setting, a refresh)."""

    def __init__(self, generation: int) -> None:
        super().__init__()
        self.generation = generation


class PageLoaded(Loaded):
    """A page of the walk, read for its index; `token` is the change probe taken before the first page."""

    def __init__(self, generation: int, index: int, page: Page, token: tuple[int, int] | None) -> None:
        super().__init__(generation)
        self.index = index
        self.page = page
        self.token = token


class PageFailed(Loaded):
    def __init__(self, generation: int, index: int, error: MnemoError) -> None:
        super().__init__(generation)
        self.index = index
        self.error = error


class ReportLoaded(Loaded):
    def __init__(self, generation: int, report: EmptyReport) -> None:
        super().__init__(generation)
        self.report = report


class ActivityLoaded(Loaded):
    def __init__(self, generation: int, activity: Activity) -> None:
        super().__init__(generation)
        self.activity = activity


class WatermarkLoaded(Loaded):
    def __init__(self, generation: int, watermark: Watermark | None) -> None:
        super().__init__(generation)
        self.watermark = watermark


class LiveFound(Loaded):
    def __init__(self, generation: int, batch: LiveBatch | None) -> None:
        super().__init__(generation)
        self.batch = batch


class LiveFailed(Loaded):
    def __init__(self, generation: int, error: MnemoError) -> None:
        super().__init__(generation)
        self.error = error


class ScopesLoaded(Message):
    def __init__(self, items: list[ScopeItem]) -> None:
        super().__init__()
        self.items = items


class ScopesFailed(Message):
    def __init__(self, error: MnemoError) -> None:
        super().__init__()
        self.error = error


class CountLoaded(Message):
    def __init__(self, scope: str | None, count: int) -> None:
        super().__init__()
        self.scope = scope
        self.count = count


class ChainLoaded(Message):
    def __init__(self, atom_id: str, chain: Chain) -> None:
        super().__init__()
        self.atom_id = atom_id
        self.chain = chain


class CaughtUp(Message):
    def __init__(self, scope: str | None, result: CatchupResult) -> None:
        super().__init__()
        self.scope = scope
        self.result = result


class CatchUpFailed(Message):
    def __init__(self, scope: str | None, error: MnemoError) -> None:
        super().__init__()
        self.scope = scope
        self.error = error


class Problem(Message):
    """A background read failed outside the feed (the sidebar, a watermark, a chain): shown as a notification."""

    def __init__(self, error: MnemoError) -> None:
        super().__init__()
        self.error = error
