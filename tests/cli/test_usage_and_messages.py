"""Pins the fixes of the CLI conformance audit (docs/audit.md): each test fails on the code before its fix."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOM_RE = r"xroom:room_[0-9A-Z]{26}"


@pytest.fixture
def demo(cli: Any) -> Any:
    """A small seeded demo store: own domains, two rooms, a secret."""
    r = cli("demo", "--entries", "40", "--seed", "7")
    assert r.code == 0, r.stderr
    return cli


# -- errors are one or two lines (docs/cli.md, Exit codes) ------------------------------------


@pytest.mark.parametrize(
    ("args", "needle", "help_of"),
    [
        (["recent", "--bogus"], "No such option: --bogus", "mnemo recent"),
        (["nosuchcommand"], "No such command 'nosuchcommand'", "mnemo"),
        (["recent", "--limit", "abc"], "'abc' is not a valid int", "mnemo recent"),
        (["vault", "add", "k1"], "Missing option '--context'", "mnemo vault add"),
        (["rooms", "invite", "r", "--max-uses", "x"], "--max-uses", "mnemo rooms invite"),
    ],
)
def test_usage_errors_are_two_lines(run_cli: Any, args: list[str], needle: str, help_of: str) -> None:
    r = run_cli(*args)
    assert r.code == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 2, r.stderr
    assert lines[0].startswith("mnemo: ") and needle in lines[0]
    assert lines[1] == f"Try '{help_of} --help' for help."
    assert "Traceback" not in r.stderr


def test_a_group_alone_still_prints_its_whole_help(run_cli: Any) -> None:
    r = run_cli("rooms")
    assert r.code == 0 and "Commands:" in r.stdout and "invite" in r.stdout  # as gh does (issue 36)


# -- errors name the flag the user typed --------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["recent", "--limit", "101"], "mnemo: --limit must be between 1 and 100, got 101"),
        (["catchup", "-n", "0"], "mnemo: --limit must be between 1 and 100, got 0"),
        (["search", "x", "--limit", "501"], "mnemo: --limit must be between 1 and 500, got 501"),
    ],
)
def test_limit_errors_name_the_flag(run_cli: Any, args: list[str], message: str) -> None:
    r = run_cli(*args)
    assert r.code == 2 and r.stderr.strip() == message


def test_invite_errors_name_the_flags(demo: Any) -> None:
    r = demo("rooms", "invite", "build-fleet", "--max-uses", "0")
    assert r.code == 2 and r.stderr.strip() == "mnemo: --max-uses must be between 1 and 1000, got 0"
    r = demo("rooms", "invite", "build-fleet", "--expires-days", "91")
    assert r.code == 2 and r.stderr.strip() == "mnemo: --expires-days must be between 1 and 90, got 91"


# -- help is accurate ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "command", [["rooms", "list"], ["rooms", "create"], ["rooms", "invite"], ["rooms", "join"], ["vault", "list"]]
)
def test_help_offers_only_the_formats_the_command_takes(run_cli: Any, command: list[str]) -> None:
    helped = run_cli(*command, "--help")
    assert helped.code == 0 and "table or json." in helped.stdout and "ndjson" not in helped.stdout
    refused = run_cli(*command, *(["x"] if command[1] in ("create", "invite", "join") else []), "--format", "ndjson")
    assert refused.code == 2 and "table, json" in refused.stderr


def test_help_names_values_by_what_they_are(run_cli: Any) -> None:
    r = run_cli("recent", "--help")
    assert r.code == 0 and "<str>" not in r.stdout and "<int>" not in r.stdout
    assert "--scope SCOPE" in r.stdout and "--since TIME" in r.stdout and "--limit N" in r.stdout
    assert "Usage: mnemo rooms invite [OPTIONS] ROOM" in run_cli("rooms", "invite", "--help").stdout


# -- an empty search says what it covered ---------------------------------------------------


def _rooms(cli: Any) -> list[dict[str, Any]]:
    rooms = json.loads(cli("rooms", "list", "--format", "json").stdout)
    assert isinstance(rooms, list)
    return rooms


def test_empty_unscoped_search_names_the_unsearched_rooms(demo: Any) -> None:
    rooms = _rooms(demo)
    assert len(rooms) == 2
    table = demo("search", "zzqqxxnothing")
    assert table.code == 0 and table.stderr == ""
    assert "matches the query 'zzqqxxnothing'" in table.stdout
    for room in rooms:
        assert room["address"] in table.stdout and room["name"] in table.stdout
    assert table.stdout.rstrip().endswith("Re-run with --scope set to one of these addresses to read it.")
    # NDJSON: stdout stays empty, the same report goes to stderr (docs/cli.md common rules).
    nd = demo("search", "zzqqxxnothing", "--format", "ndjson")
    assert nd.code == 0 and nd.stdout == "" and nd.stderr.strip() == table.stdout.strip()
    # JSON keeps its fixed shape.
    js = demo("search", "zzqqxxnothing", "--format", "json")
    assert json.loads(js.stdout) == {"items": [], "query": "zzqqxxnothing", "scope": None} and js.stderr == ""


def test_empty_search_of_an_empty_scope_says_the_scope_is_empty(demo: Any) -> None:
    r = demo("search", "anything", "--scope", "no-such-domain")
    assert r.code == 0 and r.stdout.strip() == "Domain 'no-such-domain' of your own store holds no entries yet."


# -- messages a person reads ---------------------------------------------------------------


def test_keys_revoke_confirms_on_stderr(run_cli: Any) -> None:
    assert run_cli("keys", "create", "alice").code == 0
    key_id = json.loads(run_cli("keys", "list", "--format", "json").stdout)[0]["key_id"]
    r = run_cli("keys", "revoke", key_id)
    assert r.code == 0 and r.stdout == "" and f"Key {key_id} revoked" in r.stderr


def test_watermark_messages_say_your_own_store(run_cli: Any) -> None:
    r = run_cli("watermark", "show")
    assert r.code == 0 and "on your own store:" in r.stdout and "(own store)" not in r.stdout
    r = run_cli("watermark", "reset")
    assert r.code == 0 and r.stdout == "" and "on your own store;" in r.stderr


def test_demo_summary_counts_what_it_wrote(run_cli: Any) -> None:
    r = run_cli("demo", "--entries", "10", "--seed", "1")
    assert r.code == 0
    assert "Wrote 10 demo entries and 1 revision" in r.stdout or "Wrote 10 demo entries and 3 revisions" in r.stdout
    # Each room line counts the principals that really wrote there: never more than its entries.
    import re

    rooms = re.findall(r"room '[^']+' " + ROOM_RE + r": (\d+) entr(?:y|ies) by (\d+) authors?", r.stdout)
    assert len(rooms) == 2
    for entries, authors in rooms:
        assert 1 <= int(authors) <= int(entries)


# -- the same against `mnemo serve` ----------------------------------------------------------


@pytest.fixture
def remote(cli: Any, isolated_home: Path) -> Iterator[Any]:
    """`cli` pointed at the demo store served by the app `mnemo serve` runs, with a key of `local`."""
    from tests.support.wire import served_store

    assert cli("demo", "--entries", "40", "--seed", "7").code == 0
    key = cli("keys", "create", "local").stdout.strip()
    with served_store(isolated_home / "store.db") as server:
        env = {"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": key}

        def run(*args: str, **kw: Any) -> Any:
            return cli(*args, env={**env, **kw.pop("env", {})}, **kw)

        yield run


def test_remote_empty_search_names_rooms_and_flags(remote: Any) -> None:
    r = remote("search", "zzqqxxnothing", "--format", "ndjson")
    assert r.code == 0 and r.stdout == "" and "Re-run with --scope" in r.stderr
    r = remote("rooms", "invite", "build-fleet", "--max-uses", "1001")
    assert r.code == 2 and r.stderr.strip() == "mnemo: --max-uses must be between 1 and 1000, got 1001"


def test_remote_status_names_the_principal_the_server_knows(remote: Any) -> None:
    table = remote("status")
    assert table.code == 0 and "local (key key_" in table.stdout and "watermarks kept as key:" in table.stdout
    data = json.loads(remote("status", "--format", "json").stdout)
    assert data["principal"] == "local"  # through GET /mnemo/whoami (tests/cli/test_status_whoami.py)


# -- tables fit the width -------------------------------------------------------------------


def test_vault_list_clips_a_long_context_to_the_width(cli: Any) -> None:
    context = "a very long context sentence " * 10
    assert cli("vault", "add", "long.ctx", "--context", context, input="value\n").code == 0
    r = cli("vault", "list", columns=80)
    assert r.code == 0
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["ALIAS", "CREATED", "CONTEXT"]
    assert all(len(line) <= 80 for line in lines) and lines[1].endswith("…")
    # JSON keeps the whole context.
    assert json.loads(cli("vault", "list", "--format", "json").stdout)["secrets"][0]["context"] == context


def test_write_ref_error_names_the_flag(run_cli: Any) -> None:
    r = run_cli("write", "x", "--ref", "r" * 256)
    assert r.code == 2 and r.stderr.strip() == "mnemo: --ref must be 1 to 255 characters, got 256"


# -- --debug anywhere -------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["recent", "--limit", "0", "--debug"], ["rooms", "invite", "nosuch", "--debug"]])
def test_debug_after_the_command_adds_the_traceback(run_cli: Any, args: list[str]) -> None:
    r = run_cli(*args)
    assert r.code in (2, 4) and "No such option" not in r.stderr
    assert "Traceback (most recent call last)" in r.stderr and r.stderr.rstrip().splitlines()[-1].startswith("mnemo: ")
    plain = run_cli(*[a for a in args if a != "--debug"])
    assert plain.code == r.code and "Traceback" not in plain.stderr and len(plain.stderr.splitlines()) == 1


def test_debug_after_a_double_dash_is_content(run_cli: Any) -> None:
    r = run_cli("write", "--", "--debug")
    assert r.code == 0
    assert json.loads(run_cli("recent", "--format", "json").stdout)["items"][0]["content"] == "--debug"


def test_the_origin_and_the_api_base_are_one_endpoint_and_one_watermark(run_cli: Any, isolated_home: Path) -> None:
    from tests.support.wire import served_store

    key = run_cli("keys", "create", "local").stdout.strip()
    run_cli("write", "before the first pass")
    with served_store(isolated_home / "store.db") as server:
        # A catch-up through the /api/v1 base (how watermarks were kept), then one through the origin:
        # the same endpoint, so the second pass starts at the first one's watermark.
        first = run_cli("catchup", "--format", "json", env={"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": key})
        assert first.code == 0 and "before the first pass" in first.stdout
        second = run_cli("catchup", "--format", "json", env={"MNEMO_ENDPOINT": server.base, "MNEMO_API_KEY": key})
        assert second.code == 0 and "before the first pass" not in second.stdout
        # A 404 that is an answer stays one: an unknown invite code.
        r = run_cli("rooms", "join", "mnvr_nope", env={"MNEMO_ENDPOINT": server.base, "MNEMO_API_KEY": key})
        assert r.code == 2 and r.stderr.strip() == "mnemo: unknown invite code"


def test_serve_warns_when_no_key_can_reach_it(run_cli: Any, isolated_home: Path) -> None:
    import signal

    from tests.support.serve import start_serve

    served = start_serve(isolated_home)
    code, log = served.stop(signal.SIGTERM)
    assert code == 0 and "no active API key yet" in log and "mnemo keys create PRINCIPAL" in log
    assert run_cli("keys", "create", "alice").code == 0
    served = start_serve(isolated_home)
    code, log = served.stop(signal.SIGTERM)
    assert code == 0 and "no active API key" not in log and "ready at" in log


# -- a room's name given as a scope; a malformed room address ---------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["recent", "--scope", "build-fleet"],
        ["recent", "--scope", "build-fleet", "--format", "ndjson"],
        ["recent", "--scope", "build-fleet", "--all", "--format", "json"],
        ["catchup", "--scope", "build-fleet", "--format", "ndjson"],
        ["search", "x", "--scope", "build-fleet"],
    ],
)
def test_a_scope_named_like_one_room_and_no_domain_reads_the_room(demo: Any, args: list[str]) -> None:
    address = next(r["address"] for r in _rooms(demo) if r["name"] == "build-fleet")
    r = demo(*args)
    assert r.code == 0
    note = f"(Your own store has no domain 'build-fleet': reading your room of that name, --scope {address})"
    assert r.stderr.splitlines()[0] == note and note not in r.stdout
    assert "holds no entries" not in r.stdout + r.stderr
    if args[0] != "search":
        assert r.stdout.strip()  # the room's entries


def test_no_room_hint_for_a_domain_no_room_is_named_after(demo: Any) -> None:
    r = demo("recent", "--scope", "not-a-room")
    assert r.code == 0 and r.stderr == ""


def test_rooms_invite_with_a_malformed_address_is_a_usage_error(demo: Any) -> None:
    for room in ("xroom:", "xroom:bad"):
        r = demo("rooms", "invite", room)
        assert r.code == 2 and "a room address is xroom:room_" in r.stderr
    r = demo("rooms", "invite", "no-such-room-name")
    assert r.code == 4  # a well-formed name one is not in stays a 4, like an unknown room


def test_blank_environment_values_count_as_unset(run_cli: Any) -> None:
    env = {"MNEMO_PRINCIPAL": "  ", "MNEMO_CONSUMER": " ", "MNEMO_AGENT": " "}
    status = json.loads(run_cli("status", "--format", "json", env=env).stdout)
    assert status["principal"] == "local" and status["consumer"] == "default"
    assert run_cli("write", "blank env", env=env).code == 0
    item = json.loads(run_cli("recent", "--format", "json").stdout)["items"][0]
    assert item["content"] == "blank env" and item["provenance"]["principal"] == "local"
    assert item["provenance"].get("agent") is None


def test_watermark_set_in_the_future_warns_on_stderr(run_cli: Any) -> None:
    r = run_cli("watermark", "set", "2999-01-01", "--format", "json")
    assert r.code == 0 and json.loads(r.stdout)["created_at"] == "2999-01-01T00:00:00.000000Z"
    assert "is in the future" in r.stderr and "mnemo watermark reset" in r.stderr
    r = run_cli("watermark", "set", "2h")
    assert r.code == 0 and r.stderr == ""


# -- bytes that are not UTF-8: bad input (2), never an internal error ---------------------------


def _raw(args: list[bytes], stdin: bytes, home: Path) -> tuple[int, str]:
    import os
    import subprocess

    from tests.support.cli import MNEMO
    from tests.support.keyrings import subprocess_env

    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update({"MNEMO_HOME": str(home), "NO_COLOR": "1", **subprocess_env(home / "test-keyring.json")})
    proc = subprocess.run([MNEMO.encode(), *args], input=stdin, capture_output=True, env=env, timeout=60, check=False)
    return proc.returncode, proc.stderr.decode("utf-8", "replace")


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        ([b"write", b"\xff\xfe bad"], b"", "mnemo: argument 2 ('"),
        ([b"recent", b"--scope", b"\xff"], b"", "mnemo: argument 3 ('"),
        ([b"write"], b"\xff\xfe bad", "mnemo: the input is not valid UTF-8 text"),
        ([b"vault", b"add", b"k", b"--context", b"c"], b"\xff\xfe", "mnemo: the input is not valid UTF-8 text"),
    ],
)
def test_invalid_utf8_is_a_usage_error(isolated_home: Path, args: list[bytes], stdin: bytes, message: str) -> None:
    code, err = _raw(args, stdin, isolated_home)
    assert code == 2 and err.startswith(message) and len(err.splitlines()) == 1
    assert "internal error" not in err and "Traceback" not in err


@pytest.mark.parametrize("group", [[], ["keys"], ["watermark"], ["rooms"], ["vault"]])
def test_command_summaries_are_not_cut_off(run_cli: Any, group: list[str]) -> None:
    r = run_cli(*group, "--help", env={"COLUMNS": "80"})
    assert r.code == 0
    listed = r.stdout[r.stdout.index("Commands:") :].splitlines()[1:]
    ours = [line for line in listed if line.split()[0] not in ("check", "verify")]  # cmd_proof's own
    assert ours and not [line for line in ours if line.rstrip().endswith("...")], r.stdout


def test_vault_context_takes_what_the_hosted_schema_allows(run_cli: Any) -> None:
    # CreateSecretRequest.context: maxLength 10000 (the engine refused anything over 2000).
    assert run_cli("vault", "add", "long.ok", "--context", "c" * 10_000, input="v\n").code == 0
    listed = json.loads(run_cli("vault", "list", "--format", "json").stdout)["secrets"]
    assert [len(s["context"]) for s in listed if s["alias"] == "long.ok"] == [10_000]
    r = run_cli("vault", "add", "long.no", "--context", "c" * 10_001, input="v\n")
    assert r.code == 2 and r.stderr.strip() == "mnemo: --context is at most 10000 characters, got 10001"


def test_server_vault_context_takes_what_the_hosted_schema_allows(run_cli: Any, isolated_home: Path) -> None:
    import httpx

    from tests.support.wire import served_store

    key = run_cli("keys", "create", "local").stdout.strip()
    with served_store(isolated_home / "store.db") as server:
        body = {"alias": "ctx5000", "context": "c" * 5000, "sealed_secret_b64": "eA=="}
        r = httpx.post(server.url + "/vault/secrets", json=body, headers={"X-Api-Key": key})
        assert r.status_code == 200 and r.json()["alias"] == "ctx5000"


def test_write_repeat_limits_name_the_flags(run_cli: Any) -> None:
    concepts = [a for i in range(257) for a in ("--concept", f"c{i}")]
    r = run_cli("write", "x", *concepts)
    assert r.code == 2 and r.stderr.strip() == "mnemo: --concept repeats at most 256 times, got 257"
    olds = [a for i in range(33) for a in ("--supersedes", f"00000000-0000-0000-0000-{i:012d}")]
    r = run_cli("write", "x", *olds)
    assert r.code == 2 and r.stderr.strip() == "mnemo: --supersedes repeats at most 32 times, got 33"


def test_recent_table_gives_the_content_the_room_short_columns_leave(cli: Any) -> None:
    text = "The quick brown fox jumps over the dog."  # 39 characters
    assert cli("write", text, "--scope", "ci").code == 0
    r = cli("recent", columns=80)
    header, row = r.stdout.splitlines()
    assert header.split() == ["WHEN", "AUTHOR", "DOMAIN", "CONTENT"]
    assert text in row and len(row) <= 80  # was clipped to 21 characters behind 18- and 16-wide columns


def test_a_store_or_state_under_a_file_says_how_to_recover(run_cli: Any, isolated_home: Path) -> None:
    blocker = isolated_home / "a-file"
    blocker.write_text("not a folder")
    r = run_cli("recent", env={"MNEMO_STORE": str(blocker / "store.db")})
    assert r.code == 6 and len(r.stderr.splitlines()) == 1
    assert str(blocker / "store.db") in r.stderr and "named by MNEMO_STORE" in r.stderr
    r = run_cli("write", "x", env={"MNEMO_STORE": str(blocker / "store.db")})
    assert r.code == 6 and len(r.stderr.splitlines()) == 1
    assert str(blocker / "store.db") in r.stderr and "its folder does not exist" in r.stderr
    r = run_cli("catchup", env={"MNEMO_STATE": str(blocker / "state.db")})
    assert r.code == 6 and len(r.stderr.splitlines()) == 1
    assert "cannot be opened" in r.stderr and "point MNEMO_STATE elsewhere" in r.stderr
    assert "Your watermarks are in it" not in r.stderr  # there is no file to move aside


@pytest.mark.parametrize("command", [["recent"], ["catchup"], ["search", "the"]])
def test_a_room_table_has_no_domain_column_repeating_its_address(demo: Any, command: list[str]) -> None:
    address = _rooms(demo)[0]["address"]
    r = demo(*command, "--scope", address, columns=120)
    assert r.code == 0
    header, *rows = r.stdout.splitlines()
    assert rows and header.split() == ["WHEN", "AUTHOR", "CONTENT"]
    assert not [row for row in rows if "xroom:" in row]
    own = demo("recent", columns=120)
    assert "DOMAIN" in own.stdout.splitlines()[0]
