"""Provides `mnemo demo`: realistic sample entries, two shared rooms, a secret and a few supersessions, in bulk."""

from __future__ import annotations

import random
from collections.abc import Callable

from mnemo_tui import timefmt
from mnemo_tui.engine.interface import Engine
from mnemo_tui.errors import Conflict, ValidationError
from mnemo_tui.values.model import RecentQuery, Value
from mnemo_tui.values.rooms import Room
from mnemo_tui.values.writes import WriteRequest

MIN_ENTRIES = 10
MAX_ENTRIES = 1_000_000
DAY_US = 86_400_000_000
SPAN_US = 30 * DAY_US
SECRET_ALIAS = "staging-deploy-token"
ROOMS = (
    ("build-fleet", "Where the CI and release bots report to each other."),
    ("design-review", "Decisions and open questions on the catch-up client's design."),
)
ROOM_AUTHORS = {
    "build-fleet": ("build-bot", "release-bot", "flaky-hunter"),
    "design-review": ("alice", "bob"),
}
# The agent each room author writes through (bots write as themselves: no agent).
ROOM_AGENTS: dict[str, str | None] = {
    "build-bot": None,
    "release-bot": None,
    "flaky-hunter": None,
    "alice": "claude-code",
    "bob": "cursor",
}

_BRANCHES = ("main", "release/1.4", "feat/cursor-v2", "fix/empty-report", "feat/tui-sidebar", "chore/deps")
_TESTS = (
    "test_cursor_roundtrip",
    "test_walk_under_writes",
    "test_empty_report_names_rooms",
    "test_watermark_commit_after_walk",
    "test_room_membership_in_query",
    "test_search_refuses_empty_query",
    "test_supersession_filter",
)
_FILES = (
    "engine/sqlite/store.py",
    "catchup.py",
    "cli/feed.py",
    "tui/feed_view.py",
    "backends/remote.py",
    "server/app.py",
)
_PEOPLE = ("alice", "bob", "chen", "dana", "emeka", "farah")
_TOPICS = (
    "keyset pagination",
    "inclusive since windows",
    "boundary ids at the watermark",
    "FTS5 phrase quoting",
    "room membership checks",
    "retry with Retry-After",
    "supersession chains",
    "NDJSON streaming",
)
_SERVICES = ("api-gateway", "memory-core", "search-indexer", "billing", "auth")

_TEMPLATES: dict[str, tuple[tuple[str, str], ...]] = {
    "ci": (
        ("build-bot", "Build #{n} on {branch} failed: {test} timed out after {secs}s (runner ci-{r})."),
        ("build-bot", "Build #{n} on {branch} passed in {mins}m{secs}s; {count} tests, 0 failures."),
        ("flaky-hunter", "{test} is flaky: {count} failures in the last 50 runs, all on runner ci-{r}. Quarantined."),
        ("release-bot", "Tagged v1.{r}.{n3} from {branch}; wheels uploaded, changelog drafted."),
        ("build-bot", "Coverage on {branch} dropped to {pct}% ({file} lost {count} covered lines)."),
    ),
    "code-review": (
        ("reviewer", "PR #{n} ({branch}): asked for a test that writes while the walk pages; {file} looks right."),
        ("reviewer", "PR #{n}: approved after {person} split {file} in two; nothing else blocking."),
        (
            "reviewer",
            "PR #{n}: the cursor is rebuilt from a timestamp in {file}; that can skip entries. Requested changes.",
        ),
        ("assistant", "Summarised the review thread of PR #{n} for {person}: three nits, one real bug in {file}."),
    ),
    "research": (
        ("researcher", "Read up on {topic}: the invariant is that nothing commits behind the reader's cursor."),
        ("researcher", "Compared three vendors on {topic}; only one documents what happens under concurrent writes."),
        (
            "researcher",
            "## Notes on {topic}\n\n- order by created_at, then id\n- the cursor carries the last position\n"
            "- a short page is not the end; only a missing cursor is\n\nOpen question for {person}: {topic} across rooms?",
        ),
    ),
    "ops": (
        ("ops-bot", "{service} p99 latency {ms} ms over the last hour (budget 250 ms); paging on-call {person}."),
        ("ops-bot", "Deployed {service} {branch}@{sha} to staging; health checks green after {secs}s."),
        ("ops-bot", "Disk on db-{r} at {pct}%; compaction scheduled for 02:00 UTC."),
        ("ops-bot", "Incident INC-{n} resolved: {service} returned 503 for {mins} minutes after a bad config push."),
    ),
    "planning": (
        ("planner", "Sprint {r} goal: ship {topic} behind a flag; owner {person}."),
        ("planner", "Moved 'polish {file}' to next sprint; {person} is out until Thursday."),
        (
            "assistant",
            "Standup summary: {person} finished {file}, {person2} is blocked on {topic}, the flaky {test} is quarantined.",
        ),
    ),
    "general": (
        ("assistant", "Reminder for {person}: the {service} API key rotates on Friday."),
        ("assistant", "{person} prefers short summaries with links to the PRs, not pasted diffs."),
        ("assistant", "Learned: the staging {service} needs a warm-up request before the first benchmark run."),
    ),
}
_ROOM_TEMPLATES: dict[str, tuple[str, ...]] = {
    "build-fleet": (
        "Nightly on {branch}: {count} jobs, {fails} red. Worst offender {test}.",
        "Taking the release lock for v1.{r}.{n3}; other bots please hold merges to main.",
        "Released the lock; v1.{r}.{n3} is out. Artifacts in the usual bucket.",
        "Runner ci-{r} keeps losing its cache; rebuilding it from scratch.",
        "Bisected the slowdown in {test} to {sha}: {file} now opens one connection per page.",
    ),
    "design-review": (
        "Decision: {topic} stays in the engine, not in the CLI. Reason: every front end needs it.",
        "Question for the room: should the TUI show {topic} in the sidebar or the detail pane?",
        "I tried {topic} on a 1M-entry store: first page in a few ms, the walk flat in memory.",
        "Proposal: the empty report names unsearched rooms in the order the reader joined them.",
        "Objection to {file}: it imports the HTTP client at start-up; make it lazy.",
    ),
}


class DemoSummary(Value):
    """What `mnemo demo` wrote."""

    store: str
    principal: str
    own_entries: int
    domains: tuple[str, ...]
    rooms: tuple[tuple[Room, int, int], ...]  # each room, the entries written to it, how many principals wrote them
    superseded: int
    secret: str | None
    seconds: float


def _filler(rng: random.Random) -> dict[str, object]:
    people = rng.sample(_PEOPLE, 2)
    return {
        "n": rng.randint(1000, 9999),
        "n3": rng.randint(0, 30),
        "r": rng.randint(1, 9),
        "secs": rng.randint(2, 59),
        "mins": rng.randint(1, 45),
        "ms": rng.randint(120, 900),
        "pct": rng.randint(60, 97),
        "count": rng.randint(3, 900),
        "fails": rng.randint(0, 4),
        "branch": rng.choice(_BRANCHES),
        "test": rng.choice(_TESTS),
        "file": rng.choice(_FILES),
        "person": people[0],
        "person2": people[1],
        "topic": rng.choice(_TOPICS),
        "service": rng.choice(_SERVICES),
        "sha": f"{rng.getrandbits(28):07x}",
    }


def _times(rng: random.Random, count: int, low: int, high: int) -> list[int]:
    return sorted(rng.randint(low, high) for _ in range(count))


def newest(store: Engine, principal: str) -> int | None:
    """The newest instant of the principal's own store and of its demo rooms, or None when all are empty."""
    scopes: list[str | None] = [None]
    scopes += [r.address for r in store.list_rooms(principal) if r.name in dict(ROOMS) and r.role == "owner"]
    found = [
        page.items[0].created_at
        for scope in scopes
        if (page := store.recent(principal, RecentQuery(scope=scope, limit=1, include_history=True))).items
    ]
    return max(found) if found else None


def _room(store: Engine, principal: str, name: str, description: str) -> Room:
    for room in store.list_rooms(principal):
        if room.name == name and room.role == "owner":
            return room
    return store.create_room(principal, name, description)


def _own_rows(rng: random.Random, times: list[int], pool: list[dict[str, object]]) -> list[tuple[WriteRequest, int]]:
    domains = rng.choices(list(_TEMPLATES), [5, 3, 2, 2, 1, 2], k=len(times))
    rows = []
    for created, domain in zip(times, domains, strict=True):
        agent, template = rng.choice(_TEMPLATES[domain])
        content = template.format_map(rng.choice(pool))
        concepts = (domain, agent)
        rows.append(
            (WriteRequest(content, domain, concepts, agent=agent, agent_name=agent, client_env="demo"), created)
        )
    return rows


def fill(
    store: Engine,
    principal: str,
    entries: int,
    *,
    seed: int | None = None,
    progress: Callable[[int], None] | None = None,
    after: int | None = None,
    seal_to: bytes | None = None,
) -> DemoSummary:
    """Fill an embedded store with realistic sample data in bulk.

    About 80% of the entries go to the principal's own store across six domains (written by
    several agents); the rest to two rooms the principal owns, written in bursts by other
    principals who joined by invite. Three entries get a newer revision, and the vault gets one
    secret. Running it again adds more.

    Args:
        store: the open store.
        principal: the demo principal (owner of the rooms).
        entries: how many entries in all (10 to 1,000,000).
        seed: for repeatable content.
        progress: called with the number of entries written so far.
        after: the newest instant the store already holds (see `newest`): the new entries are
            spread between it and now, so a second fill still reads as written over time.
        seal_to: the public key the sample secret is sealed to (the CLI's: the user's own); None: a throwaway.

    Raises:
        ValidationError: an entry count out of range.
    """
    if isinstance(entries, bool) or not MIN_ENTRIES <= entries <= MAX_ENTRIES:
        raise ValidationError(f"--entries must be between {MIN_ENTRIES} and {MAX_ENTRIES:,}, got {entries}")
    started = timefmt.now_us()
    rng = random.Random(seed)
    high = started - 60_000_000
    low = high - SPAN_US
    if after is not None and after >= low:
        # Entries go after the newest one (the engine's clock runs forward per store): spread over
        # what is left of the past, at least a microsecond apart.
        low = after + 1
        high = max(started, low + entries)
    in_rooms = max(2, entries // 5)
    own = entries - in_rooms
    report = progress or (lambda _n: None)
    # Slot values drawn once into a pool: varied enough to read as real, cheap enough for 100,000 rows.
    pool = [_filler(rng) for _ in range(min(entries, 4000))]

    # Own store: one bulk transaction per 20,000 rows keeps memory flat and progress visible.
    own_times = _times(rng, own, low, high)
    domains: set[str] = set()
    done = 0
    for start in range(0, len(own_times), 20_000):
        rows = _own_rows(rng, own_times[start : start + 20_000], pool)
        domains.update(req.domain for req, _ in rows)
        done += store.bulk_insert([(principal, req, created) for req, created in rows])
        report(done)

    room_results: list[tuple[Room, int, int]] = []
    for index, (name, description) in enumerate(ROOMS):
        room = _room(store, principal, name, description)
        authors = (principal, *ROOM_AUTHORS[name])
        for author in authors[1:]:
            invite = store.create_invite(principal, room.room_id, scope="read_write", max_uses=1)
            store.join(author, invite.code)
        count = in_rooms // 2 + (in_rooms % 2 if index == 0 else 0)
        times = _times(rng, count, low, high)
        templates = _ROOM_TEMPLATES[name]
        # Authors write in bursts (a bot reports several things at once), interleaved in time.
        batch: list[tuple[str, WriteRequest, int]] = []
        longest = max(2, min(40, count // 8))  # several authors even in a small demo
        turn = 0
        position = 0
        while position < len(times):
            author = authors[turn % len(authors)]
            turn += rng.randint(1, len(authors) - 1)  # the next burst is someone else's
            agent = ROOM_AGENTS.get(author, "assistant")
            burst = times[position : position + rng.randint(1, longest)]
            for created in burst:
                content = rng.choice(templates).format_map(rng.choice(pool))
                request = WriteRequest(content, room.address, (name,), agent=agent, agent_name=agent, client_env="demo")
                batch.append((author, request, created))
            position += len(burst)
        for start in range(0, len(batch), 20_000):
            done += store.bulk_insert(batch[start : start + 20_000])
            report(done)
        room_results.append((room, count, len({author for author, _, _ in batch})))

    superseded = _supersede(store, principal, rng)
    secret = _secret(store, principal, seal_to)
    return DemoSummary(
        store=store.identity,
        principal=principal,
        own_entries=own + superseded,
        domains=tuple(sorted(domains)),
        rooms=tuple(room_results),
        superseded=superseded,
        secret=secret,
        seconds=(timefmt.now_us() - started) / 1e6,
    )


def _supersede(store: Engine, principal: str, rng: random.Random) -> int:
    page = store.recent(principal, RecentQuery(scope="planning", limit=3))
    for entry in page.items:
        revised = f"{entry.content}\n\n(Revised by planner: owner changed to {rng.choice(_PEOPLE)}.)"
        request = WriteRequest(
            revised,
            "planning",
            ("planning", "revision"),
            supersedes=(entry.atom_id,),
            agent="planner",
            agent_name="planner",
            client_env="demo",
        )
        store.write(principal, request)
    return len(page.items)


def _secret(store: Engine, principal: str, public: bytes | None) -> str | None:
    """One sample secret, sealed to `public` (the user's pair, so `vault get` shows it), else to a throwaway pair."""
    from mnemo_tui.state import sealing

    key = public if public is not None else sealing.generate().public
    sealed = sealing.seal(key, b"demo-" + random.randbytes(12).hex().encode(), SECRET_ALIAS)
    try:
        store.vault_add(principal, SECRET_ALIAS, "Token the deploy bot uses for the staging cluster", sealed, ("ops",))
    except Conflict:
        return None
    return SECRET_ALIAS
