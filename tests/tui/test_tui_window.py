"""The TUI's feed window without Textual: pages by cursor, a bounded number held, evicted pages read again."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mnemo_tui.tui.data.live import LiveTracker
from mnemo_tui.tui.data.window import FeedWindow, PageRequest
from mnemo_tui.values.model import Entry, Page


def entry(i: int) -> Entry:
    return Entry.of(atom_id=f"id-{i:05d}", created_at=1_000_000 - i, wire="{}")


def paged(total: int, sizes: list[int]) -> list[Page]:
    """A walk of `total` entries in pages of the given sizes (short and even empty pages keep their cursor)."""
    pages: list[Page] = []
    at = 0
    for size in sizes:
        if at >= total:
            break
        items = [entry(i) for i in range(at, min(at + size, total))]
        at += len(items)
        pages.append(Page(items, f"c{len(pages) + 1}" if at < total else None))
    if at < total or not pages:
        pages.append(Page([entry(i) for i in range(at, total)], None))
    return pages


@given(
    total=st.integers(0, 300),
    sizes=st.lists(st.integers(0, 40), min_size=1, max_size=30),
    keep=st.integers(1, 5),
    views=st.lists(st.tuples(st.integers(0, 400), st.integers(1, 40)), max_size=8),
)
def test_the_window_equals_the_walk_whatever_is_evicted_and_read_again(
    total: int, sizes: list[int], keep: int, views: list[tuple[int, int]]
) -> None:
    pages = paged(total, sizes)
    window = FeedWindow(keep_pages=keep)
    while (request := window.next_request()) is not None:
        assert request.cursor == (None if request.index == 0 else f"c{request.index}")
        assert window.add_page(request.index, pages[request.index])
        first = max(window.row_count - 5, 0)
        window.evict(first, window.row_count)
        # The first page, plus at most `keep` others, plus those on screen (never dropped).
        on_screen = {window.slot_of_row(row) for row in range(first, window.row_count)}
        assert window.held_pages <= keep + 1 + len(on_screen)
    assert window.at_end
    assert window.row_count == total
    for first, height in views:
        last = first + height - 1
        for request in window.missing(first, last):
            assert window.add_page(request.index, pages[request.index])
        for row in range(first, min(last, total - 1) + 1):
            assert window.entry(row) == entry(row)
        window.evict(first, last)
        for row in range(first, min(last, total - 1) + 1):
            assert window.entry(row) == entry(row)


def test_a_page_read_for_a_stale_position_is_refused() -> None:
    window = FeedWindow()
    assert window.add_page(0, Page([entry(0)], "c1"))
    assert not window.add_page(2, Page([entry(5)], None))  # no page 1 yet: cannot be page 2
    assert not window.add_page(0, Page([entry(0)], "c1"))  # held already
    assert window.next_request() == PageRequest(1, "c1")


def test_live_entries_go_on_top_and_repeats_at_the_newest_instant_are_dropped() -> None:
    window = FeedWindow()
    window.add_page(0, Page([entry(3), entry(4)], None))
    tracker = LiveTracker()
    tracker.observe([entry(3), entry(4)])
    assert tracker.newest == entry(3).created_at
    assert tracker.ids_at_newest == {entry(3).atom_id}
    window.prepend([entry(1), entry(2)])
    assert [window.entry(i) for i in range(4)] == [entry(1), entry(2), entry(3), entry(4)]
    assert window.slot_of_row(0) is None and window.slot_of_row(2) == 0


@given(
    total=st.integers(1, 200),
    size=st.integers(1, 30),
    evicted=st.sets(st.integers(1, 10)),
    head=st.integers(0, 5),
    removed=st.sets(st.integers(0, 204), max_size=40),
)
def test_dropping_removed_entries_keeps_the_window_equal_to_the_walk_without_them(
    total: int, size: int, evicted: set[int], head: int, removed: set[int]
) -> None:
    window = FeedWindow(keep_pages=100)
    window.prepend([entry(-1 - i) for i in reversed(range(head))])  # live entries, newer than the walk
    pages = paged(total, [size] * 200)
    for index, page in enumerate(pages):
        assert window.add_page(index, page)
    for index in evicted & set(range(1, len(pages))):
        window.slots[index].items = None
    gone = {entry(i - head).atom_id for i in removed}
    held_before = sum(1 for e in [window.entry(r) for r in range(window.row_count)] if e and e.atom_id in gone)
    assert window.drop(gone) == held_before
    # An evicted page read again with its cursor comes back without its removed entries (the server's answer).
    for request in window.missing(0, window.row_count - 1):
        page = pages[request.index]
        assert window.add_page(request.index, Page([e for e in page.items if e.atom_id not in gone], page.next_cursor))
    expected = [entry(i) for i in range(-head, total) if entry(i).atom_id not in gone]
    assert [window.entry(r) for r in range(window.row_count)] == expected
