"""`mnemo help`, usage lines, `watermark list --consumer`, and the near-scope hints (`--scope CI`, `--scope all`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mnemo_tui.cli.app import COMMANDS, load

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("words", [[], ["recent"], ["watermark", "set"], ["rooms"], ["help"]])
def test_help_is_a_command_printing_what_help_prints(run_cli: Any, words: list[str]) -> None:
    asked = run_cli("help", *words)
    flag = run_cli(*words, "--help")
    assert asked.code == 0 and flag.code == 0, asked.stderr
    assert asked.stdout == flag.stdout and asked.stdout.startswith("Usage: mnemo")


def test_help_of_an_unknown_command_is_a_usage_error_with_the_near_name(run_cli: Any) -> None:
    wrong = run_cli("help", "recnt")
    assert wrong.code == 2 and "did you mean 'recent'?" in wrong.stderr and wrong.stdout == ""
    assert run_cli("help", "recent", "extra").code == 2


def _usage_lines(command: Any, path: str) -> list[str]:
    import typer

    ctx = typer.Context(command, info_name=path)
    lines = [command.get_usage(ctx)]
    for name, sub in getattr(command, "commands", {}).items():
        lines += _usage_lines(sub, f"{path} {name}")
    return lines


def test_usage_lines_name_arguments_by_their_metavar_never_in_braces() -> None:
    lines = [line for name in COMMANDS for line in _usage_lines(load(name), f"mnemo {name}")]
    assert not [line for line in lines if "{" in line]
    assert "Usage: mnemo watermark set [OPTIONS] TIME" in lines and "Usage: mnemo delete [OPTIONS] ID..." in lines
    assert "Usage: mnemo profile use [OPTIONS] [NAME]" in lines  # an optional argument stays in brackets


def test_watermark_list_takes_a_consumer(run_cli: Any) -> None:
    run_cli("watermark", "set", "2026-11-30T07:00:00Z", "--consumer", "bot")
    run_cli("watermark", "set", "2026-11-30T08:00:00Z", "--consumer", "other", "--scope", "ci")
    mine = json.loads(run_cli("watermark", "list", "--consumer", "bot", "-f", "json").stdout)
    assert [(w["consumer"], w["scope"]) for w in mine] == [("bot", None)]
    assert len(json.loads(run_cli("watermark", "list", "-f", "json").stdout)) == 2
    none = run_cli("watermark", "list", "-c", "nobody")
    assert none.code == 0 and "No watermarks of consumer 'nobody'" in none.stdout


def test_a_scope_in_another_case_gets_the_near_scope_hint(run_cli: Any) -> None:
    run_cli("write", "a build", "--scope", "ci")
    for typed in ("CI", "cii"):
        empty = run_cli("recent", "--scope", typed)
        assert empty.code == 0 and "(Did you mean domain 'ci'? --scope ci)" in empty.stderr, typed


def test_scope_all_points_to_all_scopes_instead_of_quietly_reading_an_empty_domain(run_cli: Any) -> None:
    run_cli("write", "a build", "--scope", "ci")
    for args in (("recent", "--scope", "all"), ("catchup", "--scope", "all"), ("catchup", "--scope", "all")):
        read = run_cli(*args)
        assert read.code == 0 and "mnemo catchup --all-scopes" in read.stderr, args
        assert "no domain 'all'" in read.stderr
    # A domain named `all` that exists is read as any other, without the note.
    run_cli("write", "everything", "--scope", "all")
    named = run_cli("recent", "--scope", "all")
    assert "everything" in named.stdout and "--all-scopes" not in named.stderr


def test_a_group_alone_still_prints_its_whole_help(run_cli: Any) -> None:
    r = run_cli("rooms")
    assert r.code == 0 and "Commands:" in r.stdout and "invite" in r.stdout  # as gh does (issue 36)


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


@pytest.mark.parametrize("group", [[], ["keys"], ["watermark"], ["rooms"], ["vault"]])
def test_command_summaries_are_not_cut_off(run_cli: Any, group: list[str]) -> None:
    r = run_cli(*group, "--help", env={"COLUMNS": "80"})
    assert r.code == 0
    listed = r.stdout[r.stdout.index("Commands:") :].splitlines()[1:]
    ours = [line for line in listed if line.split()[0] not in ("check", "verify")]  # cmd_proof's own
    assert ours and not [line for line in ours if line.rstrip().endswith("...")], r.stdout


def test_bare_mnemo_prints_the_help_and_exits_0(run_cli: Any) -> None:
    for args in ([], ["rooms"]):
        r = run_cli(*args)
        assert r.code == 0 and r.stderr == "", r.stderr
        assert (
            r.stdout.startswith(f"Usage: mnemo {' '.join(args)}".rstrip() + " [OPTIONS] COMMAND")
            and "Commands:" in r.stdout
        )
    assert "recent" in run_cli().stdout


def test_check_help_says_what_it_checks(run_cli: Any) -> None:
    from mnemo_tui.proof.checks import CHECK_NAMES

    shown = run_cli("check", "--help").stdout
    assert "source document" not in shown
    assert all(name in shown for name in CHECK_NAMES)
    assert "source document" not in run_cli("--help").stdout


def test_an_author_given_as_the_agent_alone_suggests_the_form_that_matches(run_cli: Any) -> None:
    for agent in ("build-bot", "planner"):
        assert run_cli("write", f"by {agent}", env={"MNEMO_AGENT": agent}).code == 0
    for args in (["recent", "--author", "build-bot"], ["recent", "--author", "Build-Bot", "--all", "-f", "ndjson"]):
        r = run_cli(*args)
        assert r.code == 0 and "by build-bot" not in r.stdout
        assert "Did you mean author 'local/build-bot'? --author local/build-bot" in r.stderr, r.stderr
        assert "planner" not in r.stderr
    suggested = run_cli("recent", "--author", "local/build-bot", "-f", "ndjson")
    assert [json.loads(line)["content"] for line in suggested.stdout.splitlines()] == ["by build-bot"]
    assert "Did you mean author" not in run_cli("recent", "--author", "nobody").stderr
