"""Provides the reads the screen's thread workers make: each returns the message that carries its result."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.message import Message

from mnemo_tui import reports
from mnemo_tui.backends import Backend
from mnemo_tui.catchup import CatchUp
from mnemo_tui.errors import MnemoError
from mnemo_tui.model import Entry, RecentQuery
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.tui import messages as msg
from mnemo_tui.tui.data import scopes
from mnemo_tui.tui.data.chain import supersession_chain
from mnemo_tui.tui.data.live import LiveTracker, Probe
from mnemo_tui.walk import default_overlap, unread


def read_page(
    backend: Backend,
    generation: int,
    index: int,
    query: RecentQuery,
    probe: Probe,
) -> Message:
    """One page of the walk; the first page takes the change probe's token before it reads."""
    try:
        token = probe() if index == 0 else None
        return msg.PageLoaded(generation, index, backend.recent(query), token)
    except MnemoError as exc:
        return msg.PageFailed(generation, index, exc)


def read_report(backend: Backend, generation: int, query: RecentQuery) -> Message | None:
    """The empty report of an empty first page."""
    try:
        return msg.ReportLoaded(generation, reports.for_recent(backend, query))
    except MnemoError as exc:
        return msg.PageFailed(generation, 0, exc)


def read_activity(
    backend: Backend, generation: int, scope: str | None, now: int, newest: int | None, oldest: int | None
) -> Message | None:
    try:
        return msg.ActivityLoaded(generation, scopes.activity(backend, scope, now, newest, oldest))
    except MnemoError:
        return None


def read_watermark(backend: Backend, state_path: Path, generation: int, consumer: str, scope: str | None) -> Message:
    state = StateDB(state_path)
    try:
        return msg.WatermarkLoaded(generation, scopes.load_watermark(state, backend, consumer, scope))
    finally:
        state.close()


def read_scopes(backend: Backend) -> Message:
    try:
        return msg.ScopesLoaded(scopes.list_scopes(backend))
    except MnemoError as exc:
        return msg.ScopesFailed(exc)


def count_all(
    backend: Backend, state_path: Path, consumer: str, items: list[scopes.ScopeItem], post: Callable[[Message], object]
) -> None:
    """Count each scope's new entries from this consumer's watermark, posting each count as it is known."""
    state = StateDB(state_path)
    try:
        for item in items:
            try:
                mark = scopes.load_watermark(state, backend, consumer, item.scope)
                new = unread(mark, default_overlap(backend))
                post(msg.CountLoaded(item.scope, scopes.count_new(backend, new, item.scope)))
            except MnemoError:
                post(msg.CountLoaded(item.scope, -1))
    finally:
        state.close()


def poll_live(
    backend: Backend, generation: int, tracker: LiveTracker, probe: Probe, scope: str | None, history: bool
) -> Message:
    """What is new since the newest entry shown (nothing read when the store's probe says unchanged)."""
    try:
        if not tracker.changed(probe):
            return msg.LiveFound(generation, None)
        return msg.LiveFound(generation, tracker.poll(backend, scope, history))
    except MnemoError as exc:
        return msg.LiveFailed(generation, exc)


def read_chain(backend: Backend, entry: Entry) -> Message:
    return msg.ChainLoaded(entry.atom_id, supersession_chain(backend, entry))


def catch_up(backend: Backend, state_path: Path, consumer: str, scope: str | None) -> Message:
    """Mark a scope caught up exactly as `mnemo catchup` does: the same walk and commit, output discarded."""
    state = StateDB(state_path)
    try:
        catchup = CatchUp(backend, state, consumer=consumer, scope=scope)
        return msg.CaughtUp(scope, catchup.run(lambda entries: None, commit=True))
    except MnemoError as exc:
        return msg.CatchUpFailed(scope, exc)
    finally:
        state.close()
