"""Proof that each deliberately broken backend of `broken_backends` really has its defect."""

from __future__ import annotations

from pathlib import Path

from mnemo_tui.backends import Backend
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.errors import ValidationError
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.search import SearchQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.broken_backends import AnswersEmptySearch, DropsRooms, NeverEnds, OffsetPaging, RepeatsAcrossPages
from tests.support.walk import pages_of


def seeded(path: Path, n: int = 7) -> tuple[LocalBackend, list[str]]:
    backend = LocalBackend.open(path, "alice")
    ids = [backend.write(WriteRequest(content=f"entry {i}", domain="d")).atom_id for i in range(n)]
    return backend, ids


def walked(backend: Backend, limit: int = 3) -> list[str]:
    """Every id the backend served in a walk, repeats included."""
    return [e.atom_id for page in pages_of(backend, RecentQuery(scope="d", limit=limit)) for e in page.items]


def test_repeating_wrapper_really_repeats_an_entry_across_pages(tmp_path: Path) -> None:
    inner, ids = seeded(tmp_path / "s.db")
    ids_walked = walked(RepeatsAcrossPages(inner))
    assert len(ids_walked) > len(set(ids_walked)) and set(ids_walked) == set(ids)
    inner.close()


def test_room_dropping_wrapper_really_hides_rooms(tmp_path: Path) -> None:
    inner, _ = seeded(tmp_path / "s.db", 1)
    inner.create_room("team")
    assert [r.name for r in inner.rooms()] == ["team"]
    assert DropsRooms(inner).rooms() == []
    inner.close()


def test_offset_wrapper_repeats_an_entry_when_a_write_lands_mid_walk(tmp_path: Path) -> None:
    inner, ids = seeded(tmp_path / "s.db")
    broken = OffsetPaging(inner)
    first = broken.recent(RecentQuery(scope="d", limit=3))
    inner.write(WriteRequest(content="late", domain="d"))
    second = broken.recent(RecentQuery(scope="d", limit=3, cursor=first.next_cursor))
    assert first.items[-1].atom_id == second.items[0].atom_id
    assert set(walked(broken)) >= set(ids)
    inner.close()


def test_never_ending_and_empty_search_wrappers_have_their_defects(tmp_path: Path) -> None:
    inner, _ = seeded(tmp_path / "s.db", 2)
    assert NeverEnds(inner).recent(RecentQuery(scope="d", cursor="again")).next_cursor == "again"
    assert AnswersEmptySearch(inner).search(SearchQuery(query="")) == []
    try:
        inner.search(SearchQuery(query=""))
    except ValidationError:
        pass
    else:  # pragma: no cover - the real backend must refuse
        raise AssertionError("the real backend answered an empty search")
    inner.close()
