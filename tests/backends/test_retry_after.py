"""An absurd `Retry-After` (an infinity, NaN, a negative or huge number, a date far ahead or past any calendar)
never makes the client wait past its own bounds: the retry policy's computed waits are asserted, never the
clock (issue 55's leftovers)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.errors import Unavailable
from mnemo_tui.values.model import RecentQuery
from tests.support.cli import CliResult
from tests.support.wire import Canned, ThreadServer, serving

KEY = "mk_live_" + "5" * 32
BUSY = {"code": "UNAVAILABLE", "message": "busy right now", "retryable": True}
FAR = "Fri, 31 Dec 9999 23:59:59 GMT"
PAST_ANY_CALENDAR = "Fri, 31 Dec 999999999999 23:59:59 GMT"  # an OverflowError in the date's arithmetic

HUGE = ["inf", "Infinity", "1e309", "1e12", FAR]  # each a wait past the cap: the cap, `max_wait`
NO_WAIT = ["nan", "NaN", "-1", "-inf", PAST_ANY_CALENDAR, "soon"]  # each no wait the header can mean: the backoff


@pytest.fixture
def canned() -> Iterator[tuple[Canned, ThreadServer]]:
    app = Canned()
    with serving(app) as server:
        yield app, server


def refused_with(app: Canned, server: ThreadServer, header: str, **policy: Any) -> tuple[list[float], int]:
    """The waits the retry policy computed, and the attempts made, against an endpoint answering 503 each time."""
    for _ in range(8):
        app.answer(503, BUSY, {"Retry-After": header})
    sleeps: list[float] = []
    backend = RemoteBackend(server.url, KEY, sleep=sleeps.append, jitter=lambda: 1.0, **policy)
    try:
        with pytest.raises(Unavailable, match="busy right now"):
            backend.recent(RecentQuery())
    finally:
        backend.close()
    return sleeps, len(app.seen)


@pytest.mark.parametrize("header", HUGE)
def test_a_huge_retry_after_waits_the_policys_cap(canned: tuple[Canned, ThreadServer], header: str) -> None:
    sleeps, attempts = refused_with(*canned, header, retries=2, backoff=0.25, max_wait=1.5, deadline=60)
    assert (sleeps, attempts) == ([1.5, 1.5], 3)


@pytest.mark.parametrize("header", NO_WAIT)
def test_a_retry_after_that_means_no_wait_is_absent_and_the_backoff_applies(
    canned: tuple[Canned, ThreadServer], header: str
) -> None:
    # NaN read as 0 retried at once, and a date past any calendar was an OverflowError (an internal error).
    sleeps, attempts = refused_with(*canned, header, retries=2, backoff=0.25, max_wait=1.5, deadline=60)
    assert (sleeps, attempts) == ([0.25, 0.5], 3)


@pytest.mark.parametrize("header", HUGE)
def test_a_huge_retry_after_past_the_deadline_gives_up_at_once(
    canned: tuple[Canned, ThreadServer], header: str
) -> None:
    sleeps, attempts = refused_with(*canned, header, retries=4, max_wait=30, deadline=20)
    assert (sleeps, attempts) == ([], 1)


@pytest.mark.parametrize("header", ["inf", "1e309", FAR, PAST_ANY_CALENDAR, "nan"])
def test_the_cli_gives_up_within_its_deadline_with_the_endpoints_word(
    canned: tuple[Canned, ThreadServer], cli: Any, header: str
) -> None:
    app, server = canned
    for _ in range(8):
        app.answer(503, BUSY, {"Retry-After": header})
    # A deadline under the policy's 30 s cap: a huge wait is not begun, so one attempt; the others back off.
    done: CliResult = cli("recent", env={"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": KEY, "MNEMO_DEADLINE": "20"})
    assert done.code == 5, done.stderr
    assert "busy right now" in done.stderr and "internal error" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    if header in HUGE:
        assert len(app.seen) == 1
    else:
        assert 1 <= len(app.seen) <= 5  # the backoff's attempts (RETRIES + 1 at most), within the deadline


@pytest.mark.parametrize(
    ("header", "waits"), [("inf", [1.5, 1.5]), ("nan", [0.25, 0.5]), (PAST_ANY_CALENDAR, [0.25, 0.5])]
)
def test_the_follows_first_ask_reads_retry_after_the_same_way(
    canned: tuple[Canned, ThreadServer], header: str, waits: list[float]
) -> None:
    app, server = canned
    for _ in range(8):
        app.answer(503, BUSY, {"Retry-After": header})
    sleeps: list[float] = []
    policy: dict[str, Any] = {"retries": 2, "backoff": 0.25, "max_wait": 1.5, "deadline": 60}
    backend = RemoteBackend(server.url, KEY, sleep=sleeps.append, jitter=lambda: 1.0, **policy)
    try:
        with pytest.raises(Unavailable, match="busy right now"):
            backend.follow(RecentQuery())
    finally:
        backend.close()
    assert (sleeps, [path.endswith("/memory/follow") for _m, path, _b in app.seen]) == (waits, [True] * 3)
