"""Every bad query the engine's feed is given, whatever its types, is a `ValidationError` naming the first bad
field (the server and the CLI check types first; the engine is the last line)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.errors import ValidationError
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    s = Store(tmp_path_factory.mktemp("feed") / "s.db")
    for i in range(3):
        s.write("alice", WriteRequest(content=f"entry {i}"))
    yield s
    s.close()


BAD: list[tuple[dict[str, Any], str]] = [
    ({"limit": 0}, "limit"),
    ({"limit": True}, "limit"),
    ({"limit": 2.0}, "limit"),
    ({"limit": "5"}, "limit"),
    ({"limit": None}, "limit"),
    ({"limit": 0, "exclude_author": []}, "limit"),  # the limit first, before any filter is looked at
    ({"limit": 0, "since": 10, "until": 5}, "limit"),
    ({"scope": 5}, "scope"),
    ({"scope": ["a"]}, "scope"),
    ({"scope": b"d"}, "scope"),
    ({"scope": "xroom:nope"}, "room address"),
    ({"since": "x"}, "since"),
    ({"since": 1.5}, "since"),
    ({"since": True}, "since"),
    ({"until": b"x"}, "until"),
    ({"since": 1, "until": "x"}, "until"),
    ({"since": []}, "since"),
    ({"since": 10, "until": 5}, "until is before since"),
    ({"exclude_author": []}, "exclude_author"),
    ({"author": {"a": 1}}, "author"),
    ({"cursor": ""}, "malformed cursor"),
    ({"cursor": 5}, "malformed cursor"),
    ({"cursor": b"a" * 138}, "malformed cursor"),
    ({"cursor": b"A" * 66}, "malformed cursor"),
    ({"cursor": ["A"] * 66}, "malformed cursor"),
    ({"cursor": "A" * 66}, "not issued by this store"),  # shaped as either version, but forged
    ({"cursor": "a" * 138}, "not issued by this store"),
    ({"cursor": "", "since": []}, "since"),  # the filters before the cursor
]


@pytest.mark.parametrize(("fields", "named"), BAD, ids=[repr(f) for f, _ in BAD])
@pytest.mark.parametrize("read", ["recent", "recent_wire", "stream_wire"])
def test_a_bad_query_is_a_validation_error_naming_the_first_bad_field(
    store: Store, read: str, fields: dict[str, Any], named: str
) -> None:
    q = RecentQuery(**fields)
    with pytest.raises(ValidationError, match=named):
        result = getattr(store, read)("alice", q)
        list(result) if read == "stream_wire" else None
    # The model's own check (what a remote backend runs before sending) refuses it too, whatever it names,
    # but for a forged cursor of the right shape: only the store that signs cursors can tell.
    if named != "not issued by this store":
        with pytest.raises(ValidationError):
            q.validated()


def test_good_queries_still_read_after_bad_ones(store: Store) -> None:
    page = store.recent("alice", RecentQuery(limit=2))
    assert len(page.items) == 2 and page.next_cursor is not None
    rest = store.recent("alice", RecentQuery(limit=2, cursor=page.next_cursor))
    assert len(rest.items) == 1 and rest.next_cursor is None
