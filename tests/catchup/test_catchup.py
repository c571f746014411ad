"""The catch-up walk: watermarks per scope and consumer, commit at the end, boundary ids, checkpoints, resume."""

from __future__ import annotations

import pytest

from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.catchup.catchup import CatchUp
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.values.model import Entry
from mnemo_tui.values.writes import WriteRequest


class Sink:
    """Collects what a walk emits, page by page."""

    def __init__(self) -> None:
        self.pages: list[list[str]] = []

    def __call__(self, entries: list[Entry]) -> None:
        self.pages.append([e.atom_id for e in entries])

    @property
    def ids(self) -> list[str]:
        return [i for page in self.pages for i in page]


def write(backend: LocalBackend, n: int, domain: str = "general") -> list[str]:
    return [backend.write(WriteRequest(content=f"{domain} {i}", domain=domain)).atom_id for i in range(n)]


def test_first_pass_reads_everything_and_commits_the_newest(local: LocalBackend, state: StateDB) -> None:
    ids = write(local, 7)
    walk = CatchUp(local, state, limit=3)
    sink = Sink()
    result = walk.run(sink)
    assert sink.ids == list(reversed(ids))
    assert result.pages == 3 and result.delivered == 7 and result.before is None
    assert result.after is not None
    assert result.after.boundary_ids == (ids[-1],)
    assert result.after.created_at == local.get(ids[-1]).created_at
    assert walk.watermark() == result.after


def test_next_pass_returns_only_what_is_new_and_skips_the_boundary(local: LocalBackend, state: StateDB) -> None:
    write(local, 5)
    CatchUp(local, state, limit=2).run(Sink())
    new = write(local, 3)
    sink = Sink()
    result = CatchUp(local, state, limit=2).run(sink)
    assert sink.ids == list(reversed(new))
    assert result.repeats_skipped == 1  # the boundary entry, returned again because since is inclusive


def test_empty_pass_keeps_the_old_watermark(local: LocalBackend, state: StateDB) -> None:
    write(local, 2)
    first = CatchUp(local, state).run(Sink())
    second = CatchUp(local, state).run(Sink())
    assert second.delivered == 0 and not second.committed
    assert CatchUp(local, state).watermark() == first.after


def test_writes_during_a_walk_are_the_next_passes_job(local: LocalBackend, state: StateDB) -> None:
    old = write(local, 10)
    late: list[str] = []

    def emit(entries: list[Entry]) -> None:
        sink(entries)
        if len(sink.pages) == 1:
            late.extend(write(local, 2))

    sink = Sink()
    CatchUp(local, state, limit=3).run(emit)
    assert sink.ids == list(reversed(old))
    after = Sink()
    CatchUp(local, state, limit=3).run(after)
    assert after.ids == list(reversed(late))


def test_watermarks_are_per_scope_and_per_consumer(local: LocalBackend, state: StateDB) -> None:
    write(local, 3, "ops")
    write(local, 2, "research")
    ops = CatchUp(local, state, scope="ops", consumer="bot").run(Sink())
    assert ops.delivered == 3
    # Finishing the walk of one scope does not move another's, nor another consumer's.
    assert CatchUp(local, state, scope="research", consumer="bot").watermark() is None
    assert CatchUp(local, state, scope="ops", consumer="other").watermark() is None
    assert CatchUp(local, state, consumer="bot").run(Sink()).delivered == 5
    assert CatchUp(local, state, scope="ops", consumer="other").run(Sink()).delivered == 3


def test_no_commit_touches_neither_watermark_nor_checkpoint(local: LocalBackend, state: StateDB) -> None:
    write(local, 4)
    walk = CatchUp(local, state, limit=2)
    result = walk.run(Sink(), commit=False)
    assert result.delivered == 4 and not result.committed
    assert walk.watermark() is None and not walk.has_checkpoint()


class Crash(Exception):
    pass


def test_a_walk_killed_half_way_leaves_the_watermark_and_resume_finishes_it(
    local: LocalBackend, state: StateDB
) -> None:
    first = write(local, 3)
    CatchUp(local, state, limit=2).run(Sink())
    ids = write(local, 9)
    sink = Sink()

    def dying(entries: list[Entry]) -> None:
        sink(entries)
        if len(sink.pages) == 2:
            raise Crash

    walk = CatchUp(local, state, limit=2)
    before = walk.watermark()
    with pytest.raises(Crash):
        walk.run(dying)
    assert walk.watermark() == before  # nothing committed
    assert walk.has_checkpoint()
    # The checkpoint was saved after the first page only: the second page's output was not confirmed.
    rest = Sink()
    result = CatchUp(local, state, limit=2).run(rest, resume=True)
    assert result.resumed
    assert sink.pages[0] + rest.ids == list(reversed(ids))
    assert not set(rest.ids) & set(first)
    assert result.after is not None and result.after.boundary_ids == (ids[-1],)
    assert not walk.has_checkpoint()


def test_resume_without_a_checkpoint_is_a_normal_pass(local: LocalBackend, state: StateDB) -> None:
    ids = write(local, 3)
    sink = Sink()
    result = CatchUp(local, state).run(sink, resume=True)
    assert not result.resumed and sink.ids == list(reversed(ids))


def test_since_bounds_a_first_pass(local: LocalBackend, state: StateDB) -> None:
    ids = write(local, 5)
    cut = local.get(ids[2]).created_at
    sink = Sink()
    CatchUp(local, state, since=cut).run(sink)
    assert sink.ids == list(reversed(ids[2:]))


def test_overlap_rereads_below_the_watermark_without_repeating(local: LocalBackend, state: StateDB) -> None:
    ids = write(local, 4)
    first = Sink()
    CatchUp(local, state, overlap=3_600_000_000).run(first)
    wm = CatchUp(local, state).watermark()
    assert wm is not None and set(wm.boundary_ids) == set(ids)  # all within the hour-long window
    new = write(local, 2)
    second = Sink()
    result = CatchUp(local, state, overlap=3_600_000_000).run(second)
    assert second.ids == list(reversed(new))
    assert result.repeats_skipped == 4


def test_several_consumers_each_see_every_entry_exactly_once(local: LocalBackend, state: StateDB) -> None:
    seen: dict[str, list[str]] = {"a": [], "b": [], "c": []}
    written: list[str] = []
    for round_ in range(6):
        written += write(local, round_ + 1)
        for name in seen:
            if (round_ + ord(name)) % 2 == 0 or round_ == 5:
                sink = Sink()
                CatchUp(local, state, consumer=name, limit=2).run(sink)
                seen[name] += sink.ids
    for ids in seen.values():
        assert sorted(ids) == sorted(written)
        assert len(ids) == len(set(ids))
