"""Shared data and helpers for the TUI tests: deterministic stores, a fixed clock, a flaky backend (no tests here)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from textual.pilot import Pilot

from mnemo_tui.backends import Backend
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.engine.store import Store
from mnemo_tui.errors import AuthError, MnemoError, Unavailable
from mnemo_tui.model import Entry, Page, RecentQuery, Room, SearchHit, SearchQuery, WriteRequest, WriteResult
from mnemo_tui.timefmt import parse_iso

NOW = parse_iso("2026-11-30T09:00:00Z")
MINUTE = 60_000_000
ROOM_OPS = "room_01JDK0PS0000000000000000A1"
ROOM_DESIGN = "room_01JDK0DES9GN000000000000B2"


def clock() -> int:
    """The fixed clock every TUI test and snapshot uses."""
    return NOW


def add_room(store: Store, name: str, room_id: str, principal: str = "local") -> str:
    """A room with a fixed id (rooms.create_room draws a random ULID, which snapshots cannot show)."""
    with store._lock:
        store.db.execute("BEGIN IMMEDIATE")
        bucket = store.db.execute("INSERT INTO buckets(kind, owner) VALUES ('room', ?)", (room_id,)).lastrowid
        store.db.execute(
            "INSERT INTO rooms(room_id, bucket, name, description, owner, created_at) VALUES (?,?,?,?,?,?)",
            (room_id, bucket, name, None, principal, NOW - 90 * 24 * 60 * MINUTE),
        )
        store.db.execute(
            "INSERT INTO members(room_id, principal, role, scope, joined_at) VALUES (?,?,'owner','read_write',?)",
            (room_id, principal, NOW - 90 * 24 * 60 * MINUTE),
        )
        store.db.execute("COMMIT")
    return "xroom:" + room_id


def req(
    content: str, domain: str = "general", agent: str = "claude-code", concepts: tuple[str, ...] = ()
) -> WriteRequest:
    return WriteRequest(
        content=content, domain=domain, concepts=concepts, agent=agent, agent_name=agent, client_env="mcp"
    )


def fill(store: Store, count: int, *, domain: str = "general", start: int = NOW - 10_000 * MINUTE) -> None:
    """`count` numbered entries one minute apart, the newest last."""
    store.bulk_write("local", [(req(f"entry {i:05d}", domain), start + i * MINUTE) for i in range(count)])


SAMPLE = [
    ("build", "build-bot", "CI green on main after the cursor fix\n\nAll 412 tests pass in 3m12s.", ("ci",)),
    ("general", "claude-code", "Decided: watermarks are committed only after a walk ends", ("design", "catchup")),
    ("research", "researcher", "Read the FTS5 docs: bm25 scores are negative, lower is better", ("search",)),
    ("build", "build-bot", "Flaky test quarantined: test_room_invite_expiry (timezone)", ("ci", "flaky")),
    (
        "general",
        "claude-code",
        "# Release plan\n\n- tag 0.4\n- publish the wheel\n- announce in the ops room",
        ("release",),
    ),
    ("research", "researcher", "Benchmark: first page of a 1M store in 2.1 ms", ("perf",)),
    ("general", "claude-code", "Renamed the consumer of the nightly job to nightly-digest", ()),
    ("build", "build-bot", "Nightly digest sent: 14 new entries across 3 domains", ("digest",)),
]


def sample_store(store: Store, *, rooms: bool = True) -> None:
    """A small, deterministic, demo-like store: three domains, a superseded decision, two rooms."""
    rows = [
        (req(text, domain, agent, concepts), NOW - (len(SAMPLE) - i) * 37 * MINUTE)
        for i, (domain, agent, text, concepts) in enumerate(SAMPLE)
    ]
    store.bulk_write("local", rows)
    first = req("Plan: ship the TUI with a fixed page size of 50", "general", "claude-code", ("plan",))
    store.bulk_write("local", [(first, NOW - 400 * MINUTE)])
    old_id = store.db.execute("SELECT atom_id FROM atoms WHERE content LIKE 'Plan: ship%'").fetchone()[0]
    second = WriteRequest(
        content="Plan: ship the TUI with pages of 100 and a window of 8",
        domain="general",
        concepts=("plan",),
        agent="claude-code",
        agent_name="claude-code",
        client_env="mcp",
        supersedes=(old_id,),
    )
    store.bulk_write("local", [(second, NOW - 20 * MINUTE)])
    new_id = store.db.execute(
        "SELECT atom_id FROM atoms WHERE content LIKE 'Plan: ship the TUI with pages%'"
    ).fetchone()[0]
    with store._lock:
        store.db.execute("UPDATE atoms SET superseded_by = ? WHERE atom_id = ?", (new_id, old_id))
    if rooms:
        ops = add_room(store, "ops", ROOM_OPS)
        add_room(store, "design", ROOM_DESIGN)
        store.bulk_write(
            "local",
            [
                (req("Deploy window moved to Thursday 14:00 UTC", ops, "ops-bot"), NOW - 90 * MINUTE),
                (req("Pager rotation: alice this week", ops, "ops-bot"), NOW - 30 * MINUTE),
            ],
        )


def rows(app: object) -> list[Entry | None]:
    """Every row the feed has, in order (None for a row whose page is not held)."""
    from mnemo_tui.tui import MnemoApp

    assert isinstance(app, MnemoApp)
    window = app.feed_screen.window
    return [window.entry(i) for i in range(window.row_count)]


def ids(entries: list[Entry | None]) -> list[str]:
    """The atom ids of rows (`<not held>` for a row whose page is not held)."""
    return [e.atom_id if e is not None else "<not held>" for e in entries]


async def settle(pilot: Pilot[None], rounds: int = 4) -> None:
    """Let workers finish and their messages be handled, including workers started by those handlers.

    At least `rounds` rounds, then on until two rounds in a row end with no worker left (bounded).
    """
    quiet = 0
    for done in range(60):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        quiet = quiet + 1 if len(pilot.app.workers) == 0 else 0
        if done + 1 >= rounds and quiet >= 2:
            return


class FlakyBackend:
    """A real LocalBackend behind a switch: while `failure` is set, every read raises it."""

    kind = "embedded"

    def __init__(self, inner: LocalBackend, failure: Exception | None = None) -> None:
        self.inner = inner
        self.identity = inner.identity
        self.failure = failure

    @staticmethod
    def unreachable() -> MnemoError:
        return Unavailable("cannot reach http://127.0.0.1:9/api/v1 (connection refused)")

    @staticmethod
    def refused() -> MnemoError:
        return AuthError("the endpoint refused the API key (401)")

    def _check(self) -> None:
        if self.failure is not None:
            raise self.failure

    @property
    def principal(self) -> str:
        return self.inner.principal

    def recent(self, query: RecentQuery) -> Page:
        self._check()
        return self.inner.recent(query)

    def stream_wire(self, query: RecentQuery) -> Iterator[list[str]]:
        self._check()
        return self.inner.stream_wire(query)

    def write(self, request: WriteRequest) -> WriteResult:
        self._check()
        return self.inner.write(request)

    def search(self, query: SearchQuery) -> list[SearchHit]:
        self._check()
        return self.inner.search(query)

    def get(self, atom_id: str) -> Entry:
        self._check()
        return self.inner.get(atom_id)

    def delete(self, atom_id: str) -> int:
        self._check()
        return self.inner.delete(atom_id)

    def domains(self) -> list[str]:
        self._check()
        return self.inner.domains()

    def rooms(self) -> list[Room]:
        self._check()
        return self.inner.rooms()

    def __getattr__(self, name: str) -> object:
        # create_room, invite, join, vault_*: not used by the TUI; delegate unchanged. No change
        # probe: like an endpoint, this backend is polled.
        if name == "change_token":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def close(self) -> None:
        self.inner.close()


def as_backend(backend: FlakyBackend) -> Backend:
    return backend  # type: ignore[return-value]


def store_at(tmp_path: Path, name: str = "tui.db") -> Store:
    return Store(tmp_path / name)
