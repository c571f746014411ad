"""Times are written one way per output kind (docs/cli.md, "Times"): JSON's form wherever a pipe reads UTC."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)


def test_a_pipe_writes_a_utc_instant_as_json_does_never_plus_00_00(run_cli: Any) -> None:
    run_cli("write", "one", "--scope", "ci")
    run_cli("vault", "add", "db", "--context", "staging", input="hunter2\n")
    run_cli("keys", "create", "bot")
    created = json.loads(run_cli("recent", "-f", "json").stdout)["items"][0]["created_at"]
    assert created.endswith("Z")
    for env, args in (({"TZ": "UTC"}, ()), ({"TZ": "Asia/Kolkata"}, ("--utc",))):
        row = run_cli(*args, "recent", env=env).stdout.split("\t")
        assert row[0] == created, (env, row)
        run_cli(*args, "catchup", "--consumer", "c", env=env)
        mark = json.loads(run_cli("watermark", "list", "-f", "json").stdout)[0]
        listed = run_cli(*args, "watermark", "list", env=env).stdout
        assert mark["created_at"] in listed and mark["updated_at"] in listed  # the same instant, spelled alike
        for listing in (("vault", "list"), ("keys", "list"), ("watermark", "list"), ("recent",)):
            out = run_cli(*args, *listing, env=env).stdout
            assert "+00:00" not in out and " UTC" not in out and " ago" not in out, (listing, out)
    local = run_cli("recent", env={"TZ": "Asia/Kolkata"}).stdout.split("\t")[0]
    assert local.endswith("+05:30")  # a local zone keeps its offset: a table shows local time (docs/cli.md)
