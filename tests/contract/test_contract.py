"""The feed contract of docs/architecture.md, written against the `Backend` protocol so every backend runs it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mnemo_tui.backends import Backend
from mnemo_tui.errors import Conflict, Forbidden, NotFound, ValidationError
from mnemo_tui.limits import ROOM_PREFIX
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.search import SearchQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.targets import BACKENDS
from tests.support.walk import pages_of, walk_ids

Factory = Callable[..., Backend]
# Every backend, and `mnemo serve` over PostgreSQL behind pgbouncer in transaction mode (issue 41).
pytestmark = pytest.mark.parametrize("make_backend", [*BACKENDS, "remote-bouncer"], indirect=True)


def write_many(backend: Backend, n: int, domain: str = "general", prefix: str = "entry") -> list[str]:
    return [backend.write(WriteRequest(content=f"{prefix} {i}", domain=domain)).atom_id for i in range(n)]


def test_empty_feed_is_an_empty_page_without_cursor(make_backend: Factory) -> None:
    page = make_backend("alice").recent(RecentQuery())
    assert page.items == []
    assert page.next_cursor is None


def test_pages_are_newest_first_exactly_limit_long_and_end_without_cursor(make_backend: Factory) -> None:
    backend = make_backend("alice")
    ids = write_many(backend, 25)
    pages = pages_of(backend, RecentQuery(limit=10))
    assert [len(p.items) for p in pages] == [10, 10, 5]
    assert [p.next_cursor is None for p in pages] == [False, False, True]
    walked = [e.atom_id for p in pages for e in p.items]
    assert walked == list(reversed(ids))
    times = [e.created_at for p in pages for e in p.items]
    assert times == sorted(times, reverse=True) and len(set(times)) == len(times)


def test_a_walk_that_ends_on_a_full_page_has_no_trailing_empty_page(make_backend: Factory) -> None:
    backend = make_backend("alice")
    write_many(backend, 6)
    pages = pages_of(backend, RecentQuery(limit=3))
    assert [len(p.items) for p in pages] == [3, 3]


def test_source_document_run_ten_entries_limit_three_two_writes_mid_walk(make_backend: Factory) -> None:
    """The verification run of the source document: 10 entries, limit 3, 2 writes after page one."""
    writer = make_backend("alice")
    reader = make_backend("alice")
    first_ten = write_many(writer, 10)
    page = reader.recent(RecentQuery(limit=3))
    seen = [e.atom_id for e in page.items]
    newest = page.items[0].created_at
    late = write_many(writer, 2, prefix="late")
    pages = 1
    while page.next_cursor is not None:
        page = reader.recent(RecentQuery(limit=3, cursor=page.next_cursor))
        pages += 1
        seen += [e.atom_id for e in page.items]
    assert pages == 4
    assert seen == list(reversed(first_ten))
    assert not set(late) & set(seen)
    next_pass = reader.recent(RecentQuery(limit=3, since=newest))
    assert [e.atom_id for e in next_pass.items[:2]] == list(reversed(late))
    # since is inclusive: the entry at the watermark comes back, as a repeat the client skips.
    assert next_pass.items[2].atom_id == seen[0]


def test_since_and_until_are_inclusive(make_backend: Factory) -> None:
    backend = make_backend("alice")
    write_many(backend, 5)
    items = backend.recent(RecentQuery()).items
    middle = items[2]
    since_page = backend.recent(RecentQuery(since=middle.created_at))
    assert [e.atom_id for e in since_page.items] == [e.atom_id for e in items[:3]]
    until_page = backend.recent(RecentQuery(until=middle.created_at))
    assert [e.atom_id for e in until_page.items] == [e.atom_id for e in items[2:]]
    both = backend.recent(RecentQuery(since=middle.created_at, until=middle.created_at))
    assert [e.atom_id for e in both.items] == [middle.atom_id]


def test_until_before_since_is_refused(make_backend: Factory) -> None:
    with pytest.raises(ValidationError):
        make_backend("alice").recent(RecentQuery(since=10, until=5))


@pytest.mark.parametrize("limit", [0, -1, 101, 1000])
def test_limit_out_of_range_is_refused(make_backend: Factory, limit: int) -> None:
    with pytest.raises(ValidationError):
        make_backend("alice").recent(RecentQuery(limit=limit))


def test_domain_scope_reads_one_own_domain(make_backend: Factory) -> None:
    backend = make_backend("alice")
    ops = write_many(backend, 3, domain="ops")
    write_many(backend, 4, domain="research")
    assert walk_ids(backend, RecentQuery(scope="ops", limit=2)) == list(reversed(ops))
    assert len(walk_ids(backend, RecentQuery(limit=2))) == 7
    assert sorted(backend.domains()) == ["ops", "research"]


def test_own_store_is_private_to_its_principal(make_backend: Factory) -> None:
    alice, bob = make_backend("alice"), make_backend("bob")
    written = write_many(alice, 3)
    assert [e.atom_id for e in alice.recent(RecentQuery()).items] == list(reversed(written))
    assert bob.recent(RecentQuery()).items == []


# -- cursors ------------------------------------------------------------------------------


def first_cursor(backend: Backend, query: RecentQuery) -> str:
    page = backend.recent(query)
    assert page.next_cursor is not None
    return page.next_cursor


@pytest.mark.parametrize("bad", ["", "not a cursor!", "x" * 513, "AAAA", "abc=def", "🙂"])
def test_malformed_cursor_is_a_validation_error_never_a_first_page(make_backend: Factory, bad: str) -> None:
    backend = make_backend("alice")
    write_many(backend, 3)
    with pytest.raises(ValidationError):
        backend.recent(RecentQuery(limit=1, cursor=bad))


def test_cursor_is_opaque_and_shaped(make_backend: Factory) -> None:
    backend = make_backend("alice")
    write_many(backend, 3)
    cursor = first_cursor(backend, RecentQuery(limit=1))
    import re

    assert re.fullmatch(r"[A-Za-z0-9_=-]{1,512}", cursor)


def test_cursor_from_another_scope_is_refused(make_backend: Factory) -> None:
    backend = make_backend("alice")
    write_many(backend, 3, domain="ops")
    write_many(backend, 3, domain="research")
    cursor = first_cursor(backend, RecentQuery(scope="ops", limit=1))
    with pytest.raises(ValidationError):
        backend.recent(RecentQuery(scope="research", limit=1, cursor=cursor))
    with pytest.raises(ValidationError):
        backend.recent(RecentQuery(limit=1, cursor=cursor))


def test_cursor_with_other_filters_is_refused(make_backend: Factory) -> None:
    backend = make_backend("alice")
    write_many(backend, 4)
    cursor = first_cursor(backend, RecentQuery(limit=1))
    for changed in (
        RecentQuery(limit=1, cursor=cursor, since=1),
        RecentQuery(limit=1, cursor=cursor, until=2**60),
        RecentQuery(limit=1, cursor=cursor, exclude_author="bob"),
        RecentQuery(limit=1, cursor=cursor, include_history=True),
    ):
        with pytest.raises(ValidationError):
            backend.recent(changed)
    # The page size is not a filter: it may change from page to page.
    assert len(backend.recent(RecentQuery(limit=2, cursor=cursor)).items) == 2


def test_cursor_of_another_principal_is_refused(make_backend: Factory) -> None:
    alice, bob = make_backend("alice"), make_backend("bob")
    write_many(alice, 3)
    write_many(bob, 3)
    cursor = first_cursor(alice, RecentQuery(limit=1))
    with pytest.raises(ValidationError):
        bob.recent(RecentQuery(limit=1, cursor=cursor))


def test_every_one_character_edit_of_a_cursor_is_refused(make_backend: Factory) -> None:
    backend = make_backend("alice")
    write_many(backend, 3)
    cursor = first_cursor(backend, RecentQuery(limit=1))
    alphabet = "AQgw_-09aZ"
    for i in range(len(cursor)):
        for ch in alphabet:
            if ch == cursor[i]:
                continue
            forged = cursor[:i] + ch + cursor[i + 1 :]
            with pytest.raises(ValidationError):
                backend.recent(RecentQuery(limit=1, cursor=forged))


# -- writes -------------------------------------------------------------------------------


def test_external_ref_makes_a_write_idempotent(make_backend: Factory) -> None:
    backend = make_backend("alice")
    first = backend.write(WriteRequest(content="deploy 42 done", external_ref="deploy-42"))
    again = backend.write(WriteRequest(content="deploy 42 done (retry)", external_ref="deploy-42"))
    assert again.atom_id == first.atom_id
    assert [e.atom_id for e in backend.recent(RecentQuery()).items] == [first.atom_id]


@pytest.mark.parametrize(
    "request_",
    [
        WriteRequest(content=""),
        WriteRequest(content="x" * 10_001),
        WriteRequest(content="ok", domain="d" * 101),
        WriteRequest(content="ok", domain=""),
        WriteRequest(content="ok", metadata={"blob": "x" * 70_000}),
        WriteRequest(content="ok", concepts=tuple(str(i) for i in range(257))),
        WriteRequest(content="ok", external_ref="r" * 256),
        WriteRequest(content="ok", domain="xroom:not-a-room"),
    ],
    ids=["empty", "too-long", "domain-too-long", "domain-empty", "metadata-too-big", "concepts", "ref", "bad-room"],
)
def test_write_out_of_bounds_is_refused_and_stores_nothing(make_backend: Factory, request_: WriteRequest) -> None:
    backend = make_backend("alice")
    with pytest.raises(ValidationError):
        backend.write(request_)
    assert backend.recent(RecentQuery()).items == []


def test_write_at_the_bounds_is_accepted(make_backend: Factory) -> None:
    backend = make_backend("alice")
    backend.write(WriteRequest(content="x" * 10_000, domain="d" * 100))
    backend.write(WriteRequest(content="y"))
    assert len(backend.recent(RecentQuery()).items) == 2


def test_items_carry_provenance_of_the_writer(make_backend: Factory) -> None:
    backend = make_backend("alice")
    backend.write(WriteRequest(content="hello", concepts=("greeting",), agent="bot-1", agent_name="bot-1"))
    item = backend.recent(RecentQuery()).items[0]
    assert item.data["provenance"]["principal"] == "alice"
    assert item.data["provenance"]["agent"] == "bot-1"
    assert item.concepts == ["greeting"]
    assert item.data["created_at"].endswith("Z")
    assert "supersedes" not in item.data and "superseded_by" not in item.data


# -- rooms --------------------------------------------------------------------------------


def room_with(make_backend: Factory) -> tuple[Backend, Backend, Backend, str]:
    """alice owns a room; bob joined read_write; carol joined read-only."""
    alice, bob, carol = make_backend("alice"), make_backend("bob"), make_backend("carol")
    room = alice.create_room("design")
    bob.join(alice.invite(room.address).code)
    carol.join(alice.invite(room.room_id, scope="read").code)
    return alice, bob, carol, room.address


def test_room_members_read_and_read_write_members_write(make_backend: Factory) -> None:
    alice, bob, carol, address = room_with(make_backend)
    a = alice.write(WriteRequest(content="from alice", domain=address)).atom_id
    b = bob.write(WriteRequest(content="from bob", domain=address)).atom_id
    for reader in (alice, bob, carol):
        assert [e.atom_id for e in reader.recent(RecentQuery(scope=address)).items] == [b, a]


def test_read_only_member_cannot_write(make_backend: Factory) -> None:
    _alice, _bob, carol, address = room_with(make_backend)
    with pytest.raises(Forbidden):
        carol.write(WriteRequest(content="nope", domain=address))


def test_non_member_and_unknown_room_get_the_same_forbidden(make_backend: Factory) -> None:
    alice, _bob, _carol, address = room_with(make_backend)
    dave = make_backend("dave")
    alice.write(WriteRequest(content="secret plans", domain=address))
    with pytest.raises(Forbidden) as foreign:
        dave.recent(RecentQuery(scope=address))
    with pytest.raises(Forbidden) as unknown:
        dave.recent(RecentQuery(scope="xroom:room_01ARZ3NDEKTSV4RRFFQ69G5FAV"))
    assert str(foreign.value) == str(unknown.value)
    with pytest.raises(Forbidden):
        dave.write(WriteRequest(content="hi", domain=address))
    with pytest.raises(Forbidden):
        dave.search(SearchQuery(query="plans", scope=address))


def test_only_the_owner_invites(make_backend: Factory) -> None:
    _alice, bob, _carol, address = room_with(make_backend)
    with pytest.raises(Forbidden):
        bob.invite(address)


def test_only_the_owner_deletes_a_room_and_it_goes_with_its_entries_invites_and_members(make_backend: Factory) -> None:
    alice, bob, carol, address = room_with(make_backend)
    kept = alice.write(WriteRequest(content="my own note")).atom_id
    entries = [alice.write(WriteRequest(content=f"room note {i}", domain=address)).atom_id for i in range(3)]
    pending = alice.invite(address).code
    for member in (bob, carol):
        with pytest.raises(Forbidden):
            member.delete_room(address)
    assert [e.atom_id for e in bob.recent(RecentQuery(scope=address)).items] == entries[::-1]
    room_id, deleted = alice.delete_room(address)
    assert (ROOM_PREFIX + room_id, deleted) == (address, 3)
    for reader in (alice, bob, carol):
        assert address not in [r.address for r in reader.rooms()]
        with pytest.raises(Forbidden):
            reader.recent(RecentQuery(scope=address))
    with pytest.raises(NotFound):
        make_backend("dave").join(pending)
    for atom in entries:
        with pytest.raises((NotFound, Forbidden)):
            alice.get(atom)
    assert [e.atom_id for e in alice.recent(RecentQuery()).items] == [kept]
    with pytest.raises(Forbidden):
        alice.delete_room(address)


def test_a_room_entry_is_deleted_by_its_author_or_the_rooms_owner_only(make_backend: Factory) -> None:
    """Our extension (docs/server.md): the author takes an entry back, the owner removes any; a member
    who is neither is refused (403: the entry is readable to them), a stranger counts it as unknown (0)."""
    alice, bob, carol, address = room_with(make_backend)
    dave = make_backend("dave")
    by_alice, by_bob, bobs_other, kept = (
        who.write(WriteRequest(content=f"note {i}", domain=address)).atom_id
        for i, who in enumerate((alice, bob, bob, alice))
    )
    for refused, atom in ((carol, by_bob), (bob, by_alice), (carol, by_alice)):
        with pytest.raises(Forbidden, match=r"only its author \(a read_write member\) or the room's owner"):
            refused.delete(atom)
    assert dave.delete(by_bob) == 0
    assert [e.atom_id for e in carol.recent(RecentQuery(scope=address)).items] == [kept, bobs_other, by_bob, by_alice]
    assert bob.delete(by_bob) == 1  # the author takes it back
    assert alice.delete(bobs_other) == 1  # the owner removes a member's entry
    assert alice.delete(by_alice) == 1
    assert alice.delete(by_alice) == 0
    for reader in (alice, bob, carol):
        assert [e.atom_id for e in reader.recent(RecentQuery(scope=address)).items] == [kept]
    with pytest.raises(NotFound):
        bob.get(by_bob)
    assert [h.entry.atom_id for h in carol.search(SearchQuery(query="note", scope=address))] == [kept]


def test_joining_twice_is_a_no_op_success(make_backend: Factory) -> None:
    alice, bob = make_backend("alice"), make_backend("bob")
    room = alice.create_room("ops")
    code = alice.invite(room.address, max_uses=1).code
    first = bob.join(code)
    again = bob.join(code)
    assert not first.already_member and again.already_member
    assert [r.address for r in bob.rooms()] == [room.address]


def test_used_up_invite_and_unknown_code(make_backend: Factory) -> None:
    alice, bob, carol = make_backend("alice"), make_backend("bob"), make_backend("carol")
    room = alice.create_room("ops")
    code = alice.invite(room.address, max_uses=1).code
    bob.join(code)
    with pytest.raises(Conflict):
        carol.join(code)
    with pytest.raises(NotFound):
        carol.join("mnvr_doesnotexist")


def test_room_name_taken_is_a_conflict(make_backend: Factory) -> None:
    alice = make_backend("alice")
    alice.create_room("ops")
    with pytest.raises(Conflict):
        alice.create_room("ops")
    # Another principal may use the same name.
    make_backend("bob").create_room("ops")


def test_rooms_list_owned_first_then_joined(make_backend: Factory) -> None:
    alice, bob = make_backend("alice"), make_backend("bob")
    joined = alice.create_room("alice-room")
    bob.join(alice.invite(joined.address, scope="read").code)
    owned = bob.create_room("bob-room")
    rooms = bob.rooms()
    assert [(r.address, r.role, r.scope) for r in rooms] == [
        (owned.address, "owner", "read_write"),
        (joined.address, "member", "read"),
    ]


def test_unscoped_read_never_covers_rooms(make_backend: Factory) -> None:
    alice = make_backend("alice")
    room = alice.create_room("design")
    alice.write(WriteRequest(content="in the room", domain=room.address))
    assert alice.recent(RecentQuery()).items == []
    assert len(alice.recent(RecentQuery(scope=room.address)).items) == 1


def test_exclude_author_drops_that_principal(make_backend: Factory) -> None:
    alice, bob, _carol, address = room_with(make_backend)
    alice.write(WriteRequest(content="a", domain=address))
    b = bob.write(WriteRequest(content="b", domain=address)).atom_id
    page = alice.recent(RecentQuery(scope=address, exclude_author="alice"))
    assert [e.atom_id for e in page.items] == [b]


# -- supersession -------------------------------------------------------------------------


def test_superseded_entries_leave_the_feed_and_history_brings_them_back(make_backend: Factory) -> None:
    backend = make_backend("alice")
    old = backend.write(WriteRequest(content="staging on Railway")).atom_id
    result = backend.write(WriteRequest(content="staging on Fly.io", supersedes=(old,)))
    assert result.superseded == (old,)
    live = backend.recent(RecentQuery()).items
    assert [e.atom_id for e in live] == [result.atom_id]
    assert live[0].supersedes == [old]
    history = backend.recent(RecentQuery(include_history=True)).items
    assert [e.atom_id for e in history] == [result.atom_id, old]
    assert history[1].superseded_by == result.atom_id
    assert history[0].superseded_by is None


def test_supersedes_is_all_or_nothing(make_backend: Factory) -> None:
    backend = make_backend("alice")
    a = backend.write(WriteRequest(content="a")).atom_id
    missing = "00000000-0000-4000-8000-000000000000"
    with pytest.raises(NotFound):
        backend.write(WriteRequest(content="b", supersedes=(a, missing)))
    assert [e.atom_id for e in backend.recent(RecentQuery()).items] == [a]


def test_room_entries_cannot_supersede(make_backend: Factory) -> None:
    alice = make_backend("alice")
    room = alice.create_room("design")
    first = alice.write(WriteRequest(content="v1", domain=room.address)).atom_id
    with pytest.raises(ValidationError):
        alice.write(WriteRequest(content="v2", domain=room.address, supersedes=(first,)))


def test_supersedes_limits(make_backend: Factory) -> None:
    backend = make_backend("alice")
    ids = write_many(backend, 33)
    with pytest.raises(ValidationError):
        backend.write(WriteRequest(content="too many", supersedes=tuple(ids)))
    with pytest.raises(ValidationError):
        backend.write(WriteRequest(content="twice", supersedes=(ids[0], ids[0])))
    assert len(backend.write(WriteRequest(content="32", supersedes=tuple(ids[:32]))).superseded) == 32


# -- search -------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["c++", "build-bot", 'say "hi"', "a AND b", "NEAR(x y)", "*", "col:val", "'quote"])
def test_search_accepts_any_user_text(make_backend: Factory, text: str) -> None:
    backend = make_backend("alice")
    target = backend.write(WriteRequest(content=f"note about {text} here")).atom_id
    backend.write(WriteRequest(content="unrelated entry"))
    hits = backend.search(SearchQuery(query=text))
    if any(ch.isalnum() for ch in text):
        assert target in [h.entry.atom_id for h in hits]


@pytest.mark.parametrize("blank", ["", "   ", "\n"])
def test_search_without_a_query_is_refused(make_backend: Factory, blank: str) -> None:
    with pytest.raises(ValidationError, match="recent"):
        make_backend("alice").search(SearchQuery(query=blank))


def test_search_orders_by_relevance_or_recency_and_respects_history(make_backend: Factory) -> None:
    backend = make_backend("alice")
    weak = backend.write(WriteRequest(content="deploy notes and many other words about other things")).atom_id
    strong = backend.write(WriteRequest(content="deploy deploy deploy")).atom_id
    newest = backend.write(WriteRequest(content="a deploy", supersedes=(weak,))).atom_id
    by_relevance = [h.entry.atom_id for h in backend.search(SearchQuery(query="deploy"))]
    assert by_relevance[0] == strong and weak not in by_relevance
    by_recency = [h.entry.atom_id for h in backend.search(SearchQuery(query="deploy", order_by="recency"))]
    assert by_recency == [newest, strong]
    with_history = [h.entry.atom_id for h in backend.search(SearchQuery(query="deploy", include_history=True))]
    assert weak in with_history


# -- vault, get, delete ---------------------------------------------------------------------


def test_secrets_never_reach_feed_search_or_listing(make_backend: Factory) -> None:
    import base64

    backend = make_backend("alice")
    value = "hunter2-very-secret-value"
    sealed = base64.b64encode(value.encode()).decode()
    backend.vault_add("db-password", "the staging database", sealed)
    backend.write(WriteRequest(content="db-password rotated"))
    listing = backend.vault_list()
    assert [(s.alias, s.context) for s in listing] == [("db-password", "the staging database")]
    texts = [e.wire for e in backend.recent(RecentQuery(include_history=True)).items]
    texts += [h.entry.wire for h in backend.search(SearchQuery(query="db-password"))]
    texts += [h.entry.wire for h in backend.search(SearchQuery(query="hunter2"))]
    texts += [repr(s) for s in listing]
    assert all(value not in t and sealed not in t for t in texts)


def test_get_and_delete_one_atom(make_backend: Factory) -> None:
    backend = make_backend("alice")
    a, b = write_many(backend, 2)
    assert backend.get(a).atom_id == a
    assert backend.delete(a) == 1
    assert backend.delete(a) == 0
    with pytest.raises(NotFound):
        backend.get(a)
    assert [e.atom_id for e in backend.recent(RecentQuery()).items] == [b]


def test_delete_during_a_walk_shrinks_it_but_never_repeats(make_backend: Factory) -> None:
    backend = make_backend("alice")
    ids = list(reversed(write_many(backend, 9)))
    page = backend.recent(RecentQuery(limit=3))
    seen = [e.atom_id for e in page.items]
    backend.delete(ids[4])
    backend.delete(ids[0])
    while page.next_cursor:
        page = backend.recent(RecentQuery(limit=3, cursor=page.next_cursor))
        seen += [e.atom_id for e in page.items]
    assert len(seen) == len(set(seen))
    assert seen == [i for i in ids if i != ids[4]]


def test_cannot_get_an_entry_of_another_store(make_backend: Factory) -> None:
    alice, bob = make_backend("alice"), make_backend("bob")
    (a,) = write_many(alice, 1)
    with pytest.raises(NotFound):
        bob.get(a)
    assert bob.delete(a) == 0
    assert alice.get(a).atom_id == a


def test_search_with_a_nul_character_works(make_backend: Factory) -> None:
    backend = make_backend("alice")
    target = backend.write(WriteRequest(content="nul byte in the query")).atom_id
    assert [h.entry.atom_id for h in backend.search(SearchQuery(query="nul\x00byte"))] == [target]


def test_author_filters_match_the_author_column_and_bind_their_cursors(make_backend: Factory) -> None:
    alice, bob, _carol, address = room_with(make_backend)
    written = {}
    for i in range(9):
        who, name, agent = [(alice, "alice", "build-bot"), (alice, "alice", "planner"), (bob, "bob", None)][i % 3]
        atom = who.write(WriteRequest(content=f"note {i}", domain=address, agent=agent, agent_name=agent)).atom_id
        written[atom] = f"{name}/{agent}" if agent else name
    newest_first = list(written)[::-1]

    def walk(**filters: str) -> list[str]:
        return walk_ids(alice, RecentQuery(scope=address, limit=2, **filters))

    assert walk(author="alice/build-bot") == [a for a in newest_first if written[a] == "alice/build-bot"]
    assert walk(author="alice") == [a for a in newest_first if written[a].startswith("alice/")]
    assert walk(exclude_author="alice/build-bot") == [a for a in newest_first if written[a] != "alice/build-bot"]
    assert walk(exclude_author="alice") == [a for a in newest_first if written[a] == "bob"]
    assert walk(author="alice", exclude_author="alice/planner") == walk(author="alice/build-bot")
    page = alice.recent(RecentQuery(scope=address, limit=2, author="alice/build-bot"))
    assert page.next_cursor
    for other in ({}, {"author": "alice/planner"}, {"exclude_author": "alice/build-bot"}):
        with pytest.raises(ValidationError):
            alice.recent(RecentQuery(scope=address, limit=2, cursor=page.next_cursor, **other))
