"""The everyday verbs through the installed console script: id prefixes, `show`, `delete`, `recent --follow`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mnemo_tui.engine import ids
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.cli import MNEMO
from tests.support.follow import Follower


@contextmanager
def opened(home: Path) -> Iterator[Store]:
    store = Store(home / "store.db")
    try:
        yield store
    finally:
        store.close()


@contextmanager
def endpoint(home: Path) -> Iterator[dict[str, str]]:
    """`mnemo serve` over MNEMO_HOME's store (in-process, loopback), as the env of a client of it."""
    from tests.support.wire import served_store

    with opened(home) as store:
        _key_id, key = store.create_key("local")
    with served_store(home / "store.db") as server:
        yield {"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": key}


def twins(home: Path) -> tuple[str, str]:
    """Two entries whose ids share their first 8 characters."""
    made = iter(["abcdef12-0000-4000-8000-000000000001", "abcdef12-0000-4000-8000-000000000002"])
    original = ids.atom_id
    ids.atom_id = made.__next__  # type: ignore[assignment]
    try:
        with opened(home) as store:
            a = store.write("local", WriteRequest("twin one\nsecondline", "general")).atom_id
            b = store.write("local", WriteRequest("twin two", "general")).atom_id
    finally:
        ids.atom_id = original  # type: ignore[assignment]
    return a, b


@pytest.mark.parametrize("remote", [False, True], ids=["embedded", "serve"])
def test_prefixes_resolve_and_ambiguity_is_refused(run_cli, isolated_home: Path, remote: bool) -> None:
    a, b = twins(isolated_home)
    with opened(isolated_home) as store:
        other = store.write("local", WriteRequest("the other", "general")).atom_id
    with endpoint(isolated_home) if remote else nullctx() as env:
        shown = run_cli("show", other[:6], "-f", "json", env=env)
        assert shown.code == 0, shown.stderr
        assert json.loads(shown.stdout)["item"]["atom_id"] == other
        ambiguous = run_cli("show", "abcdef", env=env)
        assert ambiguous.code == 2
        assert a in ambiguous.stderr and b in ambiguous.stderr and "twin one" in ambiguous.stderr
        assert "secondline" not in ambiguous.stderr  # only the first line of each candidate
        assert run_cli("show", a, env=env).code == 0  # the full id
        assert run_cli("show", "abcde", env=env).code == 2  # too short
        assert run_cli("show", "999999", env=env).code == 2  # no such entry
        revised = run_cli("write", "revised", "--supersedes", other[:8], env=env)
        assert revised.code == 0, revised.stderr
        doc = json.loads(run_cli("show", revised.stdout.strip(), "-f", "json", env=env).stdout)
        assert doc["item"]["supersedes"] == [other]
        assert [e["atom_id"] for e in doc["chain"]] == [other, revised.stdout.strip()]
        assert doc["chain_source"] in ("server", "links")


@contextmanager
def nullctx() -> Iterator[None]:
    yield None


def test_show_prints_every_field_in_every_format(run_cli, isolated_home: Path) -> None:
    with opened(isolated_home) as store:
        room = store.create_room("local", "team")
        first = store.write(
            "local",
            WriteRequest("line one\nline two", f"xroom:{room.room_id}", ("c1", "c2"), {"k": "v"}, "ref-1", agent="bot"),
        ).atom_id
    r = run_cli("show", first[:8])
    assert r.code == 0, r.stderr
    for needle in (
        first,
        "line one\nline two",
        "c1, c2",
        '{"k":"v"}',
        "ref-1",
        f"xroom:{room.room_id}",
        "room ",
        "bot",
    ):
        assert needle in r.stdout, needle
    for fmt in ("json", "ndjson"):
        doc = json.loads(run_cli("show", first, "-f", fmt).stdout)
        assert doc["item"]["content"] == "line one\nline two" and doc["item"]["concepts"] == ["c1", "c2"]
        assert doc["metadata"] == {"k": "v"} and doc["external_ref"] == "ref-1"
        assert doc["item"]["provenance"]["agent"] == "bot"
    # The chain in the table: each revision's id and first line.
    own = run_cli("write", "own one").stdout.strip()
    second = run_cli("write", "line three", "--supersedes", own[:8])
    assert second.code == 0, second.stderr
    table = run_cli("show", own[:8]).stdout
    assert "chain (2 revisions" in table and second.stdout.strip() in table and "line three" in table


@pytest.mark.parametrize("remote", [False, True], ids=["embedded", "serve"])
def test_delete_refuses_room_entries_secrets_and_no_tty_without_yes(run_cli, isolated_home: Path, remote: bool) -> None:
    with opened(isolated_home) as store:
        room = store.create_room("alice", "team")  # local is a read_write member; the entry is alice's
        store.join("local", store.create_invite("alice", room.room_id).code)
        shared = store.write("alice", WriteRequest("shared", f"xroom:{room.room_id}")).atom_id
        secret = store.vault_add("local", "token", "ctx", "c2VhbGVk")
        old = store.write("local", WriteRequest("old text", "general")).atom_id
        new = store.write("local", WriteRequest("new text", "general", supersedes=(old,))).atom_id
    with endpoint(isolated_home) if remote else nullctx() as env:
        refused = run_cli("delete", new[:8], env=env)
        assert refused.code == 2 and "--yes" in refused.stderr
        room_entry = run_cli("delete", "--yes", new[:8], shared[:8], env=env)
        assert room_entry.code == 4 and "only its author" in room_entry.stderr, room_entry.stderr
        assert room_entry.stdout == ""
        vault = run_cli("delete", "--yes", secret, env=env)
        assert vault.code == 4 and "secret" in vault.stderr
        assert run_cli("delete", "--yes", "123456", env=env).code == 2
        done = run_cli("delete", "--yes", new[:8], env=env)
        assert done.code == 0 and new in done.stdout
        listed = json.loads(run_cli("recent", "-f", "json", env=env).stdout)
    # Nothing went with a refused batch; the predecessor is the live tip again.
    assert [i["atom_id"] for i in listed["items"]] == [old]
    assert "superseded_by" not in listed["items"][0]


@pytest.mark.parametrize("remote", [False, True], ids=["embedded", "serve"])
def test_delete_takes_back_your_room_entry_and_the_owner_removes_any(
    run_cli, isolated_home: Path, remote: bool
) -> None:
    """Our extension (docs/cli.md): the author deletes a room entry, the owner any; a read-only member
    is refused (4), and an entry of a room one is not in is an unknown id (2)."""
    with opened(isolated_home) as store:
        theirs = store.create_room("alice", "team")
        store.join("local", store.create_invite("alice", theirs.room_id).code)
        mine = store.create_room("local", "ops")
        store.join("bob", store.create_invite("local", mine.room_id).code)
        closed = store.create_room("alice", "closed")
        read_only = store.create_room("alice", "news")
        store.join("local", store.create_invite("alice", read_only.room_id, scope="read").code)
        written = store.write("local", WriteRequest("my note", theirs.address)).atom_id
        alices = store.write("alice", WriteRequest("alice's note", theirs.address)).atom_id
        bobs = store.write("bob", WriteRequest("bob's note", mine.address)).atom_id
        foreign = store.write("alice", WriteRequest("not for you", closed.address)).atom_id
        news = store.write("alice", WriteRequest("the news", read_only.address)).atom_id
    with endpoint(isolated_home) if remote else nullctx() as env:
        took_back = run_cli("delete", "--yes", written[:8], env=env)
        assert (took_back.code, took_back.stdout) == (0, f"deleted {written}  my note\n"), took_back.stderr
        removed = run_cli("delete", "--yes", bobs, env=env)
        assert (removed.code, removed.stdout) == (0, f"deleted {bobs}  bob's note\n"), removed.stderr
        not_mine = run_cli("delete", "--yes", alices[:8], env=env)
        assert not_mine.code == 4 and "only its author (a read_write member) or the room's owner" in not_mine.stderr
        only_read = run_cli("delete", "--yes", news, env=env)
        assert only_read.code == 4 and "only its author" in only_read.stderr, only_read.stderr
        stranger = run_cli("delete", "--yes", foreign, env=env)
        assert stranger.code == 2 and f"no entry {foreign}" in stranger.stderr
    with opened(isolated_home) as store:
        left = [
            e.atom_id
            for a in (theirs, closed, read_only)
            for e in store.recent("alice", RecentQuery(scope=a.address)).items
        ]
        assert sorted(left) == sorted([alices, foreign, news])
        assert store.recent("local", RecentQuery(scope=mine.address)).items == []


def test_delete_of_a_room_entry_the_hosted_service_keeps_says_so(run_cli, isolated_home: Path) -> None:
    """The hosted service has no room-entry delete: it answers `deleted: 0` and keeps the entry; the CLI says why (4)."""
    from tests.support.wire import Canned, serving

    atom = "00000000-0000-4000-8000-0000000000a1"
    item = {
        "atom_id": atom,
        "content": "our plan",
        "domain": "xroom:room_01JDK0TEAM00000000000000G7",
        "created_at": "2026-01-01T00:00:00Z",
        "provenance": {"principal": "someone"},
    }
    room = {"room_id": "room_01JDK0TEAM00000000000000G7", "name": "team", "role": "owner", "scope": "read_write"}
    app = Canned().answer(200, item).answer(200, [room]).answer(200, {"deleted": 0}).answer(200, item)
    with serving(app) as server:
        env = {"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": "mk_live_" + "3" * 32}
        kept = run_cli("delete", "--yes", atom, env=env)
    assert kept.code == 4 and kept.stdout == ""
    assert f"{atom} is still in its room" in kept.stderr and "does not delete room entries" in kept.stderr
    assert "`mnemo serve` lets their author or the room's owner delete them" in kept.stderr
    assert [(method, path.rsplit("/api/v1", 1)[-1]) for method, path, _ in app.seen] == [
        ("GET", f"/memory/atoms/{atom}"),
        ("GET", "/memory/rooms"),
        ("DELETE", f"/memory/atoms/{atom}"),
        ("GET", f"/memory/atoms/{atom}"),
    ]


@pytest.mark.parametrize(
    "extra", [["-f", "json"], ["--cursor", "abc"], ["--until", "now"], ["--all"]], ids=lambda e: e[-1]
)
def test_follow_conflicts_exit_2(run_cli, extra: list[str]) -> None:
    r = run_cli("recent", "--follow", *extra)
    assert r.code == 2 and "--follow" in r.stderr
    if "json" in extra:
        assert "ndjson" in r.stderr


WRITER = """
import sys
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest
if sys.argv[1] == "-":
    from mnemo_tui.backends.local import LocalBackend
    backend = LocalBackend.open(sys.argv[2])
else:
    from mnemo_tui.backends.remote import RemoteBackend
    backend = RemoteBackend(sys.argv[1], sys.argv[2])
for i in range(int(sys.argv[3])):
    print(backend.write(WriteRequest(f"live {sys.argv[4]} {i}", "general")).atom_id, flush=True)
backend.close()
"""


@pytest.mark.parametrize("remote", [False, True], ids=["embedded", "serve"])
def test_follow_prints_every_acknowledged_entry_once(isolated_home: Path, remote: bool) -> None:
    with opened(isolated_home) as store:
        before = [store.write("local", WriteRequest(f"before {i}", "general")).atom_id for i in range(3)]
    with endpoint(isolated_home) if remote else nullctx() as env, Follower(isolated_home, env=env) as follow:
        follow.wait_for(lambda: len(follow.seen) >= 3)
        target = [env["MNEMO_ENDPOINT"], env["MNEMO_API_KEY"]] if env else ["-", str(isolated_home / "store.db")]
        writers = [
            subprocess.Popen([sys.executable, "-c", WRITER, *target, "40", str(n)], stdout=subprocess.PIPE, text=True)
            for n in range(3)
        ]
        acknowledged = [line.strip() for w in writers for line in w.communicate(timeout=120)[0].splitlines()]
        assert all(w.returncode == 0 for w in writers)
        assert len(acknowledged) == 120
        follow.wait_printed(acknowledged)
    assert follow.code == 130
    assert sorted(follow.seen) == sorted(before + acknowledged)  # every one, exactly once
    assert len(follow.seen) == len(set(follow.seen))


@pytest.mark.parametrize("answer", ["y", "n"])
def test_delete_asks_on_a_terminal(isolated_home: Path, answer: str) -> None:
    from tests.support.cli import on_terminal, terminal_env

    with opened(isolated_home) as store:
        atom = store.write("local", WriteRequest("to go", "general")).atom_id
    env = terminal_env(isolated_home, NO_COLOR="1")
    asked = on_terminal([MNEMO, "delete", atom[:8]], env=env, terminal=("stdin", "stderr"), input=answer + "\n")
    out = asked.stdout
    assert asked.code == 0
    with opened(isolated_home) as store:
        left = [e.atom_id for e in store.by_prefix("local", atom[:8])]
    assert (atom in out, left) == ((True, []) if answer == "y" else (False, [atom]))


def test_delete_shows_a_long_first_line_cut_to_one_headline(run_cli, isolated_home: Path) -> None:
    """A 3,000-character heading must not fill the terminal around `deleted <id>`: cut at 100 columns."""
    with opened(isolated_home) as store:
        long = store.write("local", WriteRequest("heading " * 375 + "\nsecond line", "general")).atom_id
    done = run_cli("delete", "--yes", long[:8])
    assert done.code == 0, done.stderr
    line = done.stdout.rstrip("\n")
    assert line.startswith(f"deleted {long}  heading heading") and line.endswith("…")
    assert len(line) - len(f"deleted {long}  ") == 100 and "\n" not in line and "second" not in line
