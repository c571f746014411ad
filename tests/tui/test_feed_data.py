"""The feed's live data without Textual (`tui/data/feed.py`): pages of one generation, polls one at a time, the
entries held as new, removals elsewhere and here, and the push follow's states, over a real temporary store."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.catchup.walk import LiveTracker
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.errors import MnemoError, RemovalsGone
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.tui.data import feed as feed_data
from mnemo_tui.tui.data.feed import FeedData
from mnemo_tui.tui.data.live import LiveBatch, LiveFound, LiveNews, PushDropped, PushEnded, PushHandle, poll_live
from mnemo_tui.tui.data.window import PageRequest
from mnemo_tui.tui.session import Session
from mnemo_tui.values.model import Entry, RecentQuery
from tests.support.tui import MINUTE, NOW, clock, fill, req


def session_of(backend: LocalBackend, state: StateDB) -> Session:
    return Session(
        backend=backend,
        state_path=Path(state.path),
        consumer="default",
        clock=clock,
        poll_interval=None,
        page_size=5,
        keep_pages=2,
    )


def opened(backend: LocalBackend, state: StateDB, posted: list[LiveNews] | None = None) -> FeedData:
    """The data of the own store with its first page read, as the widget does it."""
    data = FeedData(session_of(backend, state), (posted if posted is not None else []).append)
    data.open(None, False)
    query = data.want(PageRequest(0, None))
    assert query is not None
    assert data.page_read(data.generation, 0, backend.recent(query), data.session.probe()) is not None
    return data


def polled(data: FeedData) -> LiveFound:
    poll = data.check_live()
    assert poll is not None
    found = poll_live(data.session, poll)
    data.found(found)
    return found


def test_a_page_of_an_older_generation_or_already_in_flight_is_not_taken(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 12)
    data = FeedData(session_of(local, state), [].append)
    data.open(None, False)
    first = data.want(PageRequest(0, None))
    assert first == RecentQuery(scope=None, limit=5) and data.want(PageRequest(0, None)) is None  # in flight
    stale = local.recent(first)
    data.open("general", False)  # a new generation: the answer for the first one is dropped
    assert data.page_read(data.generation - 1, 0, stale, None) is None and not data.window.started
    assert data.want(PageRequest(0, None)) == RecentQuery(scope="general", limit=5)
    page = data.page_read(data.generation, 0, local.recent(RecentQuery(scope="general", limit=5)), None)
    assert page is not None and data.window.row_count == 5 and data.inflight == set()
    assert not data.page_failed(data.generation - 1, 1) and not data.first_failed
    assert data.page_failed(data.generation, 1) and not data.first_failed  # a later page: the rows stay


def test_a_first_page_that_failed_says_so_and_nothing_is_polled(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    data = FeedData(session_of(local, state), [].append)
    data.open(None, False)
    data.want(PageRequest(0, None))
    assert data.page_failed(data.generation, 0) and data.first_failed
    assert data.check_live() is None  # live starts with a first page


def test_polls_run_one_at_a_time_and_bring_new_entries_held_until_shown(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 3)
    data = opened(local, state)
    poll = data.check_live()
    assert poll is not None and data.check_live() is None  # one in flight
    assert not data.found(poll_live(data.session, poll))  # nothing new: the status line stays
    assert data.check_live() is not None  # the poll ended: the next may run
    data.found(LiveFound(data.generation, None))
    written = local.write(req("new one")).atom_id
    found = polled(data)
    assert [e.atom_id for e in data.arrivals(found) or []] == [written]
    assert [e.atom_id for e in data.pending] == [written] and data.window.row_count == 3
    assert data.arrivals(found) is None  # brought again (by the push, say): shown once
    assert data.show_pending() and data.pending == [] and data.window.row_count == 4
    assert not data.show_pending()


def test_too_many_new_entries_to_hold_mean_the_scope_is_read_again(
    store: Store, local: LocalBackend, state: StateDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(store, 1)
    data = opened(local, state)
    many = [Entry.of(atom_id=f"new-{i:04d}", created_at=NOW + (i + 1) * MINUTE, wire="{}") for i in range(3)]
    monkeypatch.setattr(feed_data, "PENDING_CAP", 2)
    assert data.arrivals(LiveFound(data.generation, LiveBatch(many, overflow=False))) is not None
    assert data.pending_overflow and len(data.pending) == 2


def test_removals_elsewhere_and_here_leave_the_rows_and_the_held(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 4)
    data = opened(local, state)
    shown = [e.atom_id for e in data.window.head + (data.window.slots[0].items or [])]
    mine, theirs = shown[0], shown[1]
    data.session.deleted_here.add(mine)  # as `d` notes it before its request
    assert local.delete(mine) and local.delete(theirs)
    found = polled(data)
    assert found.asked and found.error is None
    # The cursor on the third row: both rows gone were above it.
    assert data.removals(found.removals, cursor=2) == feed_data.Removed(frozenset({theirs}), 1, 1, above=2)
    assert data.window.row_count == 2 and theirs not in [e.atom_id for e in data.window.slots[0].items or []]
    assert data.removals(polled(data).removals) is None  # seen once: nothing new the next time


def test_a_backend_without_tombstones_is_never_asked_for_removals_again(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 2)
    data = opened(local, state)
    assert data.removals(None) is None and not data.tombstones
    poll = data.check_live()
    assert poll is not None and poll.after is None


def test_a_failing_poll_pauses_live_and_the_next_good_one_resumes_it(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 2)
    data = opened(local, state)
    data.live_busy = True
    assert data.found(LiveFound(data.generation, None, error=MnemoError("cannot reach it")))
    assert data.live_error == "cannot reach it" and not data.live_busy
    assert not data.found(LiveFound(data.generation, None, error=MnemoError("cannot reach it")))  # said once
    assert data.found(LiveFound(data.generation, None)) and data.live_error is None


def test_the_push_states_pushed_reconnecting_and_ended(store: Store, local: LocalBackend, state: StateDB) -> None:
    fill(store, 2)
    data = opened(local, state)
    data.push = PushHandle()  # as `start_push` leaves it over an endpoint
    assert data.found(LiveFound(data.generation, None, pushed=True)) and data.pushing
    assert data.tick() is None  # the push brings what is new: the timer does not poll
    assert data.push_dropped(PushDropped(data.generation, "stream dropped")) and data.reconnecting
    assert not data.push_dropped(PushDropped(data.generation, "stream dropped"))  # said once
    assert not data.push_dropped(PushDropped(data.generation - 1, "old"))
    assert data.found(LiveFound(data.generation, None, pushed=True)) and not data.reconnecting  # back
    assert data.push_ended(PushEnded(data.generation - 1, None)) == feed_data.Ended()  # another generation's
    gone = data.push_ended(PushEnded(data.generation, RemovalsGone("resumed past the retention")))
    assert gone == feed_data.Ended(changed=True, reread=True) and not data.pushing and data.push is None
    assert data.tick() is not None  # polled again


def test_a_backend_without_push_is_polled_and_never_followed(store: Store, local: LocalBackend, state: StateDB) -> None:
    fill(store, 2)
    posted: list[LiveNews] = []
    data = opened(local, state, posted)
    data.offers_push = True
    assert data.push_ended(PushEnded(data.generation, None, offered=False)) == feed_data.Ended()
    assert not data.offers_push
    data.resume_push(LiveFound(data.generation, None))
    assert data.push is None and posted == []


def test_the_push_follow_of_a_store_without_one_ends_as_not_offered(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    # The embedded store offers no follow: its thread says so, and the feed goes back to polls.
    fill(store, 2)
    posted: list[LiveNews] = []
    said = threading.Event()
    data = opened(local, state)
    data.post = lambda news: (posted.append(news), said.set())
    data.offers_push = True
    data.start_push()
    push = data.push
    assert push is not None
    assert said.wait(60)  # bounded: the thread asks the store once, and posts
    assert posted == [PushEnded(data.generation, None, offered=False)]
    data.stop_push()
    assert push.closed and data.push is None


def test_a_poll_reads_the_tracker_of_its_own_generation(store: Store, local: LocalBackend, state: StateDB) -> None:
    fill(store, 2)
    data = opened(local, state)
    poll = data.check_live()
    assert poll is not None and poll.tracker is data.tracker
    data.open(None, False)
    assert isinstance(data.tracker, LiveTracker) and data.tracker is not poll.tracker
    assert data.check_live() is None  # the first page of the new generation is not in yet
    stale = poll_live(data.session, poll)
    assert stale.generation == data.generation - 1
    data.found(stale)  # the old poll's answer ends the poll in flight, whatever its generation
    assert not data.live_busy
