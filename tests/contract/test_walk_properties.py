"""Property tests: walks under interleaved writes, supersessions and deletes never skip or repeat."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.catchup.catchup import CatchUp
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.values.model import Entry, RecentQuery
from mnemo_tui.values.writes import WriteRequest

DOMAINS = ["a", "b", "c"]


@dataclass
class Atom:
    atom_id: str
    domain: str
    deleted: bool = False
    superseded_by: str | None = None

    @property
    def visible(self) -> bool:
        """In the default feed: neither deleted nor replaced by a live revision."""
        return not self.deleted and self.superseded_by is None


@dataclass
class Walker:
    scope: str | None
    limit: int
    snapshot: list[str]
    cursor: str | None = None
    collected: list[str] = field(default_factory=list)
    done: bool = False
    # Predecessors made live again by the delete of their successor while the walk ran: they
    # existed before it began, so returning them (once) is neither a skip nor a repeat.
    restored: set[str] = field(default_factory=set)


class World:
    """A real store plus an oracle of what each scope holds, in feed order.

    On PostgreSQL the examples of one test share a database: each world has principals of its own
    (`tag`), whose buckets nothing else touches, which spares every example a database.
    """

    def __init__(self, root: Path, engine: Any = None, tag: str = "") -> None:
        self.owned = engine is None
        self.store = Store(root / "store.db") if engine is None else engine
        self.alice = LocalBackend(self.store, "alice" + tag)
        self.bob = LocalBackend(self.store, "bob" + tag)
        room = self.store.create_room("alice" + tag, "shared")
        code = self.store.create_invite("alice" + tag, room.room_id).code
        self.store.join("bob" + tag, code)
        self.room = room.address
        self.atoms: list[Atom] = []  # oldest first

    def scopes(self) -> list[str | None]:
        return [None, *DOMAINS, self.room]

    def write(self, domain: str, author: str = "alice", supersedes: tuple[str, ...] = ()) -> str:
        backend = self.alice if author == "alice" else self.bob
        atom = backend.write(WriteRequest(content=f"{domain} {len(self.atoms)}", domain=domain, supersedes=supersedes))
        for old in supersedes:
            next(a for a in self.atoms if a.atom_id == old).superseded_by = atom.atom_id
        self.atoms.append(Atom(atom.atom_id, domain))
        return atom.atom_id

    def delete(self, old: Atom) -> list[str]:
        """Delete an own entry; what it superseded is the live tip again (returns those ids)."""
        assert self.alice.delete(old.atom_id) == 1
        old.deleted = True
        restored = [a for a in self.atoms if a.superseded_by == old.atom_id]
        for atom in restored:
            atom.superseded_by = None
        return [a.atom_id for a in restored if not a.deleted]

    def expected(self, scope: str | None) -> list[str]:
        def in_scope(a: Atom) -> bool:
            if scope is None:
                return a.domain != self.room
            return a.domain == scope

        return [a.atom_id for a in reversed(self.atoms) if a.visible and in_scope(a)]

    def visible(self) -> set[str]:
        return {a.atom_id for a in self.atoms if a.visible}

    def close(self) -> None:
        if self.owned:
            self.store.close()


@pytest.fixture(params=["sqlite", "postgres"])
def worlds(request: pytest.FixtureRequest) -> Iterator[Callable[[Path], World]]:
    """Opens a fresh world per example, over the embedded store or PostgreSQL (parametrized)."""
    if request.param == "sqlite":
        yield World
        return
    databases = request.getfixturevalue("pg_databases")
    name = databases.create()
    from mnemo_tui.engine.postgres.store import PgStore

    engine = PgStore(databases.cluster.url(name))
    count = itertools.count()
    yield lambda root: World(root, engine, f"-{next(count)}")
    engine.close()
    databases.drop(name)


operation = st.one_of(
    st.tuples(st.just("write"), st.sampled_from([*DOMAINS, "room"]), st.sampled_from(["alice", "bob"])),
    st.tuples(st.just("supersede"), st.integers(0, 1000), st.just("")),
    st.tuples(st.just("delete"), st.integers(0, 1000), st.just("")),
    st.tuples(st.just("start"), st.integers(0, 4), st.sampled_from(["1", "2", "3", "5"])),
    st.tuples(st.just("page"), st.integers(0, 5), st.just("")),
)


@settings(max_examples=150)
@given(
    initial=st.lists(st.sampled_from([*DOMAINS, "room"]), min_size=0, max_size=12),
    ops=st.lists(operation, min_size=1, max_size=40),
)
def test_walks_return_exactly_what_existed_when_they_began(
    worlds: Callable[[Path], World], initial: list[str], ops: list[tuple[str, object, str]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        world = worlds(Path(tmp))
        try:
            for domain in initial:
                world.write(world.room if domain == "room" else domain)
            walkers: list[Walker] = []
            for kind, arg, extra in ops:
                if kind == "write":
                    domain = world.room if arg == "room" else str(arg)
                    # Only members write to the room; bob has no own-store writes in alice's scopes.
                    world.write(domain, author=extra if domain == world.room else "alice")
                elif kind == "supersede":
                    own = [a for a in world.atoms if a.visible and a.domain != world.room]
                    if own:
                        old = own[int(str(arg)) % len(own)]
                        world.write(old.domain, supersedes=(old.atom_id,))
                elif kind == "delete":
                    own = [a for a in world.atoms if a.visible and a.domain != world.room]
                    if own:
                        old = own[int(str(arg)) % len(own)]
                        restored = world.delete(old)
                        for walker in walkers:
                            walker.restored.update(restored)
                elif kind == "start":
                    scope = world.scopes()[int(str(arg))]
                    # A walk begins with its first page: that is the moment its snapshot is taken.
                    walkers.append(Walker(scope, int(extra), world.expected(scope)))
                    step(world, walkers[-1])
                elif walkers:
                    step(world, walkers[int(str(arg)) % len(walkers)])
            for walker in walkers:
                for _ in range(200):
                    if walker.done:
                        break
                    step(world, walker)
                assert walker.done
                visible = world.visible()
                # An entry hidden by a supersession while the walk passed it, and restored by a delete
                # afterwards, may be missed: only those visible all along must be there.
                still_there = [i for i in walker.snapshot if i in visible and i not in walker.restored]
                assert set(still_there) <= set(walker.collected) <= set(walker.snapshot) | walker.restored
        finally:
            world.close()


def step(world: World, walker: Walker) -> None:
    """One page of a walk, checked against the oracle on the spot."""
    if walker.done:
        return
    page = world.alice.recent(RecentQuery(scope=walker.scope, limit=walker.limit, cursor=walker.cursor))
    ids = [e.atom_id for e in page.items]
    assert len(ids) <= walker.limit
    assert not set(ids) & set(walker.collected), "an entry repeated within a walk"
    assert set(ids) <= set(walker.snapshot) | walker.restored, "an entry written after the walk began appeared in it"
    walker.collected += ids
    # Order: what the walk returned is the snapshot's order, minus what vanished.
    positions = [walker.snapshot.index(i) for i in walker.collected if i in walker.snapshot]
    assert positions == sorted(positions)
    walker.cursor = page.next_cursor
    walker.done = page.next_cursor is None


@settings(max_examples=150)
@given(
    plan=st.lists(
        st.one_of(
            st.tuples(st.just("write"), st.sampled_from([*DOMAINS, "room"]), st.just(0), st.just(0)),
            st.tuples(st.just("catchup"), st.integers(0, 2), st.integers(0, 4), st.integers(0, 3)),
        ),
        min_size=1,
        max_size=30,
    ),
    limit=st.integers(1, 4),
)
def test_catchup_passes_of_several_consumers_see_every_entry_exactly_once(
    worlds: Callable[[Path], World], plan: list[tuple[str, object, int, int]], limit: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        world = worlds(Path(tmp))
        state = StateDB(Path(tmp) / "state.db")
        delivered: dict[tuple[int, str | None], list[str]] = {}
        try:

            def run_pass(consumer: int, scope: str | None, writes_mid: int) -> None:
                got = delivered.setdefault((consumer, scope), [])
                pages = [0]

                def emit(entries: list[Entry]) -> None:
                    got.extend(e.atom_id for e in entries)
                    pages[0] += 1
                    if pages[0] == 1:
                        for i in range(writes_mid):
                            domain = DOMAINS[i % len(DOMAINS)] if i % 2 == 0 else world.room
                            world.write(domain)

                CatchUp(world.alice, state, consumer=f"c{consumer}", scope=scope, limit=limit).run(emit)

            for kind, a, b, c in plan:
                if kind == "write":
                    world.write(world.room if a == "room" else str(a))
                else:
                    run_pass(int(str(a)), world.scopes()[b], c)
            # Final passes with no writes: afterwards every consumer holds every entry of its scopes.
            for consumer, scope in list(delivered):
                run_pass(consumer, scope, 0)
            for (_consumer, scope), got in delivered.items():
                assert len(got) == len(set(got)), "a consumer received an entry twice"
                assert sorted(got) == sorted(world.expected(scope)), "a consumer missed an entry"
        finally:
            state.close()
            world.close()
