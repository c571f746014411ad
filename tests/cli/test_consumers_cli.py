"""`catchup` and `watermark` against `mnemo serve` keep a consumer's watermark on the server (docs/consumers.md):
a fresh machine continues, the later of two parallel passes exits 9, `--start`, the shared `default` consumer's
warning, a local watermark carried over, lag, prune, and an endpoint without consumers (local, said once)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mnemo_tui.backends.remote_calls import key_principal
from mnemo_tui.engine.sqlite.store import Store
from tests.support.cli import MNEMO
from tests.support.wire import served_store, serving_app, without_route


class Served:
    """A served store with a key of `alice`, and the environment of a machine of its own per `state`."""

    def __init__(self, url: str, key: str, tmp: Path) -> None:
        self.url, self.key, self.tmp = url, key, tmp

    def env(self, machine: str = "a", **more: str) -> dict[str, str]:
        return {
            "MNEMO_ENDPOINT": self.url,
            "MNEMO_API_KEY": self.key,
            "MNEMO_STATE": str(self.tmp / f"state-{machine}.db"),
            **more,
        }


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    store = Store(tmp_path / "served.db")
    key = store.create_key("alice")[1]
    store.close()
    with served_store(tmp_path / "served.db") as server:
        yield Served(server.url, key, tmp_path)


def ids(result: Any) -> list[str]:
    return [json.loads(line)["atom_id"] for line in result.stdout.splitlines() if line.strip()]


def write(cli: Any, served: Served, *texts: str) -> list[str]:
    made = []
    for text in texts:
        done = cli("write", text, env=served.env())
        assert done.code == 0, done.stderr
        made.append(done.stdout.strip())
    return made


def test_a_fresh_machine_continues_where_the_last_pass_ended(run_cli: Any, served: Served) -> None:
    first = write(run_cli, served, "one", "two")
    a = run_cli("catchup", "--consumer", "nightly", "-f", "ndjson", env=served.env("a"))
    assert a.code == 0 and sorted(ids(a)) == sorted(first), a.stderr
    later = write(run_cli, served, "three")
    b = run_cli("catchup", "--consumer", "nightly", "-f", "ndjson", env=served.env("b"))  # a new runner: no local state
    assert b.code == 0 and ids(b) == later, b.stderr
    shown = json.loads(run_cli("watermark", "show", "--consumer", "nightly", "-f", "json", env=served.env("c")).stdout)
    assert shown["consumer"] == "nightly" and later[0] in shown["boundary_ids"]  # with those in the overlap
    again = run_cli("catchup", "--consumer", "nightly", "--exit-code", env=served.env("a"))
    assert again.code == 1  # nothing new: the server's watermark held, from machine a too


def test_the_later_of_two_parallel_passes_exits_9_and_delivers_again(cli: Any, served: Served) -> None:
    # Entries big enough that pass A blocks on its full pipe mid-walk, before it can commit.
    made = write(cli, served, *[f"{i} " + "x" * 9000 for i in range(12)])
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env |= {"MNEMO_HOME": os.environ["MNEMO_HOME"], **served.env("a")}
    a = subprocess.Popen(
        [MNEMO, "catchup", "--consumer", "ci", "--limit", "1", "-f", "ndjson"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert a.stdout is not None
        head = a.stdout.readline()  # A has read its start position and is walking
        b = cli("catchup", "--consumer", "ci", "-f", "ndjson", env=served.env("b"))
        assert b.code == 0 and sorted(ids(b)) == sorted(made), b.stderr
        rest, err = a.communicate(timeout=60)
    finally:
        if a.poll() is None:
            a.kill()
    assert a.returncode == 9, err
    assert "another pass of consumer 'ci'" in err and "delivered again next pass" in err
    assert len((head + rest).splitlines()) == len(made)
    # The watermark is B's: nothing is new to the consumer, on either machine.
    assert cli("catchup", "--consumer", "ci", "--exit-code", env=served.env("a")).code == 1


def test_watermark_set_and_reset_are_unconditional_on_the_server(run_cli: Any, served: Served) -> None:
    write(run_cli, served, "old")
    assert run_cli("catchup", "--consumer", "bot", env=served.env("a")).code == 0
    later = write(run_cli, served, "new")
    done = run_cli("watermark", "set", "--consumer", "bot", "1 day ago", env=served.env("b"))
    assert done.code == 0, done.stderr
    again = run_cli("catchup", "--consumer", "bot", "-f", "ndjson", env=served.env("a"))
    assert len(ids(again)) == 2 and later[0] in ids(again)  # from the instant set, whatever was there
    reset = run_cli("watermark", "reset", "--consumer", "bot", env=served.env("b"))
    assert reset.code == 0 and "removed" in reset.stderr
    shown = run_cli("watermark", "show", "--consumer", "bot", "-f", "json", env=served.env("a"))
    assert shown.stdout.strip() == "null"


def test_start_places_a_consumer_with_no_position(run_cli: Any, served: Served) -> None:
    write(run_cli, served, "before one", "before two")
    first = run_cli("catchup", "--consumer", "fresh", "--start", "newest", "--exit-code", env=served.env("a"))
    assert first.code == 1, first.stderr  # nothing new: it begins past the newest entry
    later = write(run_cli, served, "after")
    second = run_cli("catchup", "--consumer", "fresh", "--start", "oldest", "-f", "ndjson", env=served.env("b"))
    assert ids(second) == later  # --start only places a consumer with no position
    timed = run_cli("catchup", "--consumer", "dated", "--start", "2999-01-01", "--exit-code", env=served.env("a"))
    assert timed.code == 1
    bad = run_cli("catchup", "--consumer", "x", "--start", "sometime", env=served.env("a"))
    assert bad.code == 2 and "--start must be oldest, newest or a time" in bad.stderr


def test_the_shared_default_consumer_warns_when_another_machine_moved_it_last(run_cli: Any, served: Served) -> None:
    write(run_cli, served, "one")
    body = {"position": {"created_at": "2020-01-01T00:00:00Z", "boundary_ids": []}, "host": "laptop-of-someone"}
    moved = httpx.post(served.url + "/mnemo/consumers/default", json=body, headers={"X-Api-Key": served.key})
    assert moved.status_code == 200
    first = run_cli("catchup", env=served.env("a"))
    assert (
        first.code == 0 and "was last moved from 'laptop-of-someone'" in first.stderr and "--consumer" in first.stderr
    )
    write(run_cli, served, "two")
    second = run_cli("catchup", env=served.env("a"))
    assert second.code == 0 and "last moved from" not in second.stderr  # this machine moved it last
    # A consumer named on purpose is meant to be shared: no warning.
    httpx.post(served.url + "/mnemo/consumers/nightly", json=body, headers={"X-Api-Key": served.key})
    named = run_cli("catchup", "--consumer", "nightly", env=served.env("a"))
    assert named.code == 0 and "last moved from" not in named.stderr


def test_a_local_watermark_is_carried_over_and_local_ones_can_be_kept(run_cli: Any, served: Served) -> None:
    write(run_cli, served, "one")
    local = run_cli("catchup", "--consumer", "old", env=served.env("a", MNEMO_WATERMARKS="local"))
    assert local.code == 0
    assert run_cli("watermark", "show", "--consumer", "old", "-f", "json", env=served.env("b")).stdout.strip() == "null"
    later = write(run_cli, served, "two")
    carried = run_cli("catchup", "--consumer", "old", "-f", "ndjson", env=served.env("a"))
    assert (
        carried.code == 0 and ids(carried) == later and "carrying over this machine's local watermark" in carried.stderr
    )
    shown = json.loads(run_cli("watermark", "show", "--consumer", "old", "-f", "json", env=served.env("b")).stdout)
    assert later[0] in shown["boundary_ids"]
    bad = run_cli("catchup", env=served.env("a", MNEMO_WATERMARKS="elsewhere"))
    assert bad.code == 2 and "MNEMO_WATERMARKS" in bad.stderr


def test_watermark_list_shows_lag_and_prune_forgets_idle_consumers(run_cli: Any, served: Served) -> None:
    write(run_cli, served, "one")
    assert run_cli("catchup", "--consumer", "behind", env=served.env("a")).code == 0
    write(run_cli, served, "two", "three")
    listed = json.loads(run_cli("watermark", "list", "-f", "json", env=served.env("b")).stdout)
    [row] = [r for r in listed if r["consumer"] == "behind"]
    assert row["behind_entries"] == 2 and row["behind_seconds"] > 0
    table = run_cli("watermark", "list", env=served.env("b"))
    assert "BEHIND" in table.stdout and "behind" in table.stdout
    body = {"position": {"created_at": "2020-01-01T00:00:00Z"}, "unconditional": True}
    assert httpx.post(served.url + "/mnemo/consumers/stale", json=body, headers={"X-Api-Key": served.key}).is_success
    import sqlite3

    with sqlite3.connect(served.tmp / "served.db") as db:  # untouched for 40 days, as if it had been
        db.execute("UPDATE consumers SET updated_at = updated_at - 40 * 86400000000 WHERE consumer = 'stale'")
    idle = json.loads(run_cli("watermark", "list", "--idle", "30", "-f", "json", env=served.env("b")).stdout)
    assert [r["consumer"] for r in idle] == ["stale"]
    dry = run_cli("watermark", "prune", "--dry-run", env=served.env("b"))
    assert dry.code == 0 and dry.stdout.split() == ["stale"]
    gone = run_cli("watermark", "prune", env=served.env("b"))
    assert gone.code == 0 and gone.stdout.split() == ["stale"]
    left = json.loads(run_cli("watermark", "list", "-f", "json", env=served.env("b")).stdout)
    assert [r["consumer"] for r in left] == ["behind"]


def test_an_endpoint_without_consumers_keeps_local_watermarks_said_once(run_cli: Any, tmp_path: Path) -> None:
    from mnemo_tui.server.app import create_app

    store = Store(tmp_path / "hosted.db")
    key = store.create_key("alice")[1]
    store.create_room("alice", "team")
    store.close()
    app = create_app(tmp_path / "hosted.db", workers=2)

    with serving_app(app, without_route(app, "/mnemo/consumers")) as server:
        env = {"MNEMO_ENDPOINT": server.base + "/api/v1", "MNEMO_API_KEY": key, "MNEMO_STATE": str(tmp_path / "s.db")}
        assert run_cli("write", "one", env=env).code == 0
        first = run_cli("catchup", "--all-scopes", env=env)
        assert first.code == 0, first.stderr
        assert first.stderr.count("keeps no consumers") == 1
        assert run_cli("catchup", "--exit-code", env=env).code == 1  # the local watermark held
        assert len(json.loads(run_cli("watermark", "list", "-f", "json", env=env).stdout)) == 1  # the room had nothing
        told = row(run_cli("status", env=env), "watermarks")
        assert (
            told == "in this machine's state database, as " + key_principal(key) + " (the endpoint keeps no consumers)"
        )


def test_status_says_where_the_watermarks_are_kept(run_cli: Any, served: Served) -> None:
    status = run_cli("status", env=served.env())
    assert status.code == 0, status.stderr
    assert row(status, "watermarks") == "by the server, as its consumers of this key's principal"
    assert row(status, "principal").startswith("alice (key ") and "watermarks" not in row(status, "principal")
    local = row(run_cli("status", env=served.env(MNEMO_WATERMARKS="local")), "watermarks")
    assert local == f"in this machine's state database, as {key_principal(served.key)} (MNEMO_WATERMARKS=local)"
    bad = run_cli("status", env=served.env(MNEMO_WATERMARKS="elsewhere"))
    assert bad.code == 0 and row(bad, "watermarks") == "(unknown: MNEMO_WATERMARKS must be `server` or `local`)"
    doc = json.loads(run_cli("status", "-f", "json", env=served.env()).stdout)
    assert "watermarks" not in doc  # the JSON keys are docs/cli.md's, as before


def row(result: Any, name: str) -> str:
    """One row's value of `mnemo status`'s table."""
    found = [line[len(name) :].strip() for line in result.stdout.splitlines() if line.startswith(name + " ")]
    assert len(found) == 1, result.stdout
    return found[0]


def test_changes_with_a_server_position_older_than_the_removals_kept_is_exit_8(run_cli: Any, served: Served) -> None:
    import sqlite3

    made = write(run_cli, served, "kept", "deleted")
    assert run_cli("catchup", "--consumer", "audit", "--changes", env=served.env("a")).code == 0
    assert run_cli("delete", made[1], "--yes", env=served.env("a")).code == 0
    with sqlite3.connect(served.tmp / "served.db") as db:  # the removals kept start after the consumer's watermark
        db.execute("UPDATE buckets SET tombstones_dropped = 9000000000000000")
    gone = run_cli("catchup", "--consumer", "audit", "--changes", env=served.env("b"))
    assert gone.code == 8, gone.stderr
    assert "watermark reset" in gone.stderr
