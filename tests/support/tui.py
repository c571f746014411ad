"""Shared data and helpers for the TUI tests: deterministic stores, a fixed clock, a flaky backend (no tests here)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from textual.pilot import Pilot

from mnemo_tui.backends import Backend
from mnemo_tui.backends.delegate import DelegatingBackend
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.errors import AuthError, MnemoError, Unavailable
from mnemo_tui.timefmt import parse_iso
from mnemo_tui.values.model import Entry
from mnemo_tui.values.writes import WriteRequest

NOW = parse_iso("2026-11-30T09:00:00Z")
MINUTE = 60_000_000
ROOM_OPS = "room_01JDK0PS0000000000000000A1"
ROOM_DESIGN = "room_01JDK0DES9GN000000000000B2"


def clock() -> int:
    """The fixed clock every TUI test and snapshot uses."""
    return NOW


def add_room(store: Store, name: str, room_id: str, principal: str = "local") -> str:
    """A room with a fixed id (a new room draws a random ULID, which snapshots cannot show)."""
    return store.create_room(principal, name, room_id=room_id).address


def req(
    content: str, domain: str = "general", agent: str = "claude-code", concepts: tuple[str, ...] = ()
) -> WriteRequest:
    return WriteRequest(
        content=content, domain=domain, concepts=concepts, agent=agent, agent_name=agent, client_env="mcp"
    )


def fill(store: Store, count: int, *, domain: str = "general", start: int = NOW - 10_000 * MINUTE) -> None:
    """`count` numbered entries one minute apart, the newest last."""
    store.bulk_insert([("local", req(f"entry {i:05d}", domain), start + i * MINUTE) for i in range(count)])


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
    store.bulk_insert([("local", r, t) for r, t in rows])
    first = req("Plan: ship the TUI with a fixed page size of 50", "general", "claude-code", ("plan",))
    store.bulk_insert([("local", first, NOW - 400 * MINUTE)])
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
    store.bulk_insert([("local", second, NOW - 20 * MINUTE)])
    # The superseding bulk row marks its predecessor as superseded, as a write does.
    if rooms:
        add_room(store, "design", ROOM_DESIGN)  # joined first: the sidebar lists it first
        ops = add_room(store, "ops", ROOM_OPS)
        store.bulk_insert(
            [
                ("local", req("Deploy window moved to Thursday 14:00 UTC", ops, "ops-bot"), NOW - 90 * MINUTE),
                ("local", req("Pager rotation: alice this week", ops, "ops-bot"), NOW - 30 * MINUTE),
            ]
        )


def rows(app: object) -> list[Entry | None]:
    """Every row the feed has, in order (None for a row whose page is not held)."""
    from mnemo_tui.tui import MnemoApp

    assert isinstance(app, MnemoApp)
    window = app.feed_screen.feed.window
    return [window.entry(i) for i in range(window.row_count)]


def ids(entries: list[Entry | None]) -> list[str]:
    """The atom ids of rows (`<not held>` for a row whose page is not held)."""
    return [e.atom_id if e is not None else "<not held>" for e in entries]


async def settle(pilot: Pilot[None], rounds: int = 4) -> None:
    """Let workers finish and their messages be handled, including workers started by those handlers.

    At least `rounds` rounds, then on until two rounds in a row end with no worker left; raises
    when 60 rounds never got there (workers that keep starting others), so no test goes on unsettled.
    """
    quiet = 0
    for done in range(60):
        await pilot.app.workers.wait_for_complete()
        # A real pause lets a screen refresh happen, and with it what waits for one
        # (`call_after_refresh`: the feed asks for its next page once it knows how many rows show).
        await pilot.pause(0.02)
        quiet = quiet + 1 if len(pilot.app.workers) == 0 else 0
        if done + 1 >= rounds and quiet >= 2:
            return
    raise AssertionError(f"the app never settled: workers still running {list(pilot.app.workers)}")


async def until(pilot: Pilot[None], condition: Callable[[], bool], rounds: int = 1500) -> None:
    """Wait (bounded) for a condition the app reaches by itself (a pushed event is no worker to settle)."""
    for _ in range(rounds):
        if condition():
            return
        await pilot.pause(0.02)
    raise AssertionError("the condition was never reached")


class FlakyBackend(DelegatingBackend):
    """A real LocalBackend behind a switch: while `failure` is set, every call but `principal` raises it."""

    def __init__(self, inner: LocalBackend, failure: Exception | None = None) -> None:
        super().__init__(inner)
        self.failure = failure

    @staticmethod
    def unreachable() -> MnemoError:
        return Unavailable("cannot reach http://127.0.0.1:9/api/v1 (connection refused)")

    @staticmethod
    def refused() -> MnemoError:
        return AuthError("the endpoint refused the API key (401)")

    def _guard(self) -> AbstractContextManager[object]:
        if self.failure is not None:
            raise self.failure
        return nullcontext()

    @property
    def principal(self) -> str:
        return self.inner.principal

    def change_token(self) -> None:
        """No change probe: like an endpoint, this backend is polled."""
        return None

    def close(self) -> None:
        self.inner.close()


def as_backend(backend: FlakyBackend) -> Backend:
    return backend  # type: ignore[return-value]


def remote(url: str, key: str) -> RemoteBackend:
    """A backend of the endpoint `url` that asks once and never sleeps: a refusal shows at once."""
    return RemoteBackend(url, key, retries=1, sleep=lambda seconds: None)


def store_at(tmp_path: Path, name: str = "tui.db") -> Store:
    return Store(tmp_path / name)
