"""The bounds of `/mcp`'s feed subscriptions (`mcp_mount.Subscriptions`), as the follows': past a key's 429,
past the server's 503, both retryable (`Retry-After`); a refused take holds nothing; and the 503 through HTTP on a
real `mnemo serve` with a small bound (`--max-subscriptions`)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.errors import MnemoError
from mnemo_tui.server.mcp_mount import Subscriptions, refusal
from tests.support.mcp_client import WAIT, listen_request
from tests.support.serve import ServeProcess, start_serve


def test_the_servers_bounds_refuse_past_a_key_429_and_past_the_server_503_both_retryable() -> None:
    bounds = Subscriptions(max_subscriptions=3, per_key=2)
    bounds.take("k1")
    bounds.take("k1")
    with pytest.raises(MnemoError) as per_key:
        bounds.check("k1")
    assert per_key.value.status == 429 and per_key.value.code == "TOO_MANY_SUBSCRIPTIONS"
    bounds.take("k2")
    with pytest.raises(MnemoError) as server:
        bounds.take("k3")
    assert server.value.status == 503
    for refused in (per_key.value, server.value):
        answer = refusal(refused)
        assert answer.status_code == refused.status and answer.headers["retry-after"] == "1"
    assert bounds.open == 3 and bounds.keys.held("k3") == 0  # the refused take held nothing
    bounds.give("k1")
    bounds.take("k3")


# -- through HTTP, on a real `mnemo serve` -------------------------------------------------------------------------


@pytest.fixture
def small_server(tmp_path: Path) -> Iterator[tuple[ServeProcess, list[str]]]:
    """`mnemo serve --max-subscriptions 3` over a store of its own, and three keys of three principals."""
    store_path = tmp_path / "store.db"
    store = Store(store_path)
    keys = [store.create_key(name)[1] for name in ("alice", "bob", "carol")]
    store.close()
    served = start_serve(tmp_path, "--max-subscriptions", "3", store=store_path)
    try:
        yield served, keys
    finally:
        served.stop()


def listen(url: str, key: str, *uris: str) -> Iterator[httpx.Response]:
    """A 2026-07-28 `subscriptions/listen` of `uris`, as a raw request (its answer held open while it streams)."""
    headers, body = listen_request(key, list(uris))
    with httpx.stream("POST", url, headers=headers, content=body, timeout=30) as answer:
        yield answer


def acknowledged(answer: httpx.Response) -> Iterator[str]:
    """Reads the stream up to its first event, the acknowledgement: the subscriptions are held from then on. The
    lines' iterator is returned, to be kept while the stream is to stay open (dropping it closes the stream)."""
    assert answer.status_code == 200, answer.read()
    lines = answer.iter_lines()
    for line in lines:
        if line.startswith("data:"):
            assert json.loads(line[5:])["method"] == "notifications/subscriptions/acknowledged", line
            return lines
    raise AssertionError("the listen stream ended before its acknowledgement")


def test_past_the_servers_bound_a_listen_is_refused_503_over_http_and_a_closed_stream_frees_its_slots(
    small_server: tuple[ServeProcess, list[str]],
) -> None:
    served, (alice, bob, carol) = small_server
    url = served.url.removesuffix("/api/v1") + "/mcp"
    with ExitStack() as held:
        first = held.enter_context(contextmanager(listen)(url, alice, "memory://feed", "memory://feed/a"))
        kept = [acknowledged(first)]
        second = held.enter_context(contextmanager(listen)(url, bob, "memory://feed"))
        kept.append(acknowledged(second))  # 3 held: the server's bound, each key well within its own
        with contextmanager(listen)(url, carol, "memory://feed") as refused:
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1", refused.status_code
            refused.read()
        assert "3 feed subscriptions" in refused.json()["error"]["message"]
    # Both streams closed by this client: their slots come free as the server sees each one end.
    deadline = time.monotonic() + WAIT
    while True:
        with contextmanager(listen)(url, carol, "memory://feed", "memory://feed/c", "memory://feed/d") as again:
            if again.status_code == 200:
                acknowledged(again)
                break
            assert again.status_code == 503 and time.monotonic() < deadline, again.status_code
            again.read()


def test_the_subscription_options_out_of_range_are_refused_before_serving(cli: Any) -> None:
    for option, bad, told in (
        ("--max-subscriptions", "0", "between 1 and 100000"),
        ("--max-subscriptions", "100001", "between 1 and 100000"),
        ("--subscription-send-timeout", "0", "between 1 and 3600"),
    ):
        refused = cli("serve", "--port", "0", option, bad)
        assert refused.code == 2, refused
        assert f"{option} must be {told}" in refused.stderr and "Traceback" not in refused.stderr
