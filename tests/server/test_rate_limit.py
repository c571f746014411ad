"""The request rate limits of `mnemo serve` (docs/security.md): per key, and per client address for requests
without a valid key; past either 429 `RATE_LIMITED`, retryable, with `Retry-After`. A fake clock, never time."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.server.app import create_app
from mnemo_tui.server.ratelimit import Limits, Rate


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_key_past_its_rate_gets_429_with_retry_after_others_are_served_and_time_refills_it(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = Store(path)
    alice, bob = store.create_key("alice")[1], store.create_key("bob")[1]
    store.close()
    clock = Clock()
    limits = Limits(per_key=Rate(per_second=0.5, burst=3), per_address=Rate(per_second=1, burst=100), clock=clock)
    with TestClient(create_app(path, workers=2, limits=limits)) as client:
        ask = {"X-Api-Key": alice, "X-Request-Id": "r-1"}
        assert [client.get("/api/v1/memory/stats", headers=ask).status_code for _ in range(3)] == [200] * 3
        refused = client.get("/api/v1/memory/stats", headers=ask)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "2"  # a token in 2 s at 0.5/s
        body = refused.json()
        assert body["code"] == "RATE_LIMITED" and body["retryable"] is True and body["requestId"] == "r-1"
        assert client.get("/api/v1/memory/stats", headers={"X-Api-Key": bob}).status_code == 200  # its own bucket
        assert client.get("/api/v1/health").status_code == 200  # the probes are not counted
        clock.now += 2
        assert client.get("/api/v1/memory/stats", headers=ask).status_code == 200
        assert client.get("/api/v1/memory/stats", headers=ask).status_code == 429


def test_requests_without_a_valid_key_are_limited_by_address_and_a_valid_key_from_it_is_not(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = Store(path)
    alice = store.create_key("alice")[1]
    store.close()
    clock = Clock()
    limits = Limits(per_key=Rate(per_second=100, burst=100), per_address=Rate(per_second=1, burst=2), clock=clock)
    with TestClient(create_app(path, workers=2, limits=limits)) as client:
        made_up = {"X-Api-Key": "mk_live_" + "0" * 32}
        assert client.get("/api/v1/memory/stats").status_code == 401
        assert client.get("/api/v1/memory/stats", headers=made_up).status_code == 401
        refused = client.get("/api/v1/memory/stats", headers=made_up)
        assert refused.status_code == 429 and refused.json()["code"] == "RATE_LIMITED"
        assert refused.headers["retry-after"] == "1"
        assert client.get("/api/v1/nope").status_code == 429  # an unknown path without a key counts too
        assert client.get("/api/v1/memory/stats", headers={"X-Api-Key": alice}).status_code == 200
        clock.now += 1
        assert client.get("/api/v1/memory/stats").status_code == 401


def test_the_buckets_of_names_seen_once_are_bounded() -> None:
    clock = Clock()
    limits = Limits(per_key=Rate(per_second=1, burst=1), per_address=Rate(per_second=1, burst=1), clock=clock, most=100)
    for n in range(1000):
        assert limits.keys.take(f"k{n}") == 0
    assert len(limits.keys.buckets) <= 100
