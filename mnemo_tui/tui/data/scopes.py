"""Provides the sidebar's data: the scopes a reader has, their counts of new entries, and activity over time."""

from __future__ import annotations

import math

from mnemo_tui.backends import Backend
from mnemo_tui.backends.remote_consumers import ServerWatermarks
from mnemo_tui.catchup.walk import Start, Walk
from mnemo_tui.limits import MAX_LIMIT
from mnemo_tui.state.statedb import StateDB, StateKey
from mnemo_tui.values.model import RecentQuery, Value, Watermark
from mnemo_tui.values.rooms import Room

COUNT_CAP = 99
HOUR = 3_600_000_000
DAY = 24 * HOUR


class ScopeItem(Value):
    """One line of the sidebar: a scope and how to show it."""

    scope: str | None
    label: str
    kind: str  # "own", "domain" or "room"
    room: Room | None = None

    @property
    def key(self) -> str:
        """A stable option id for the scope."""
        return "own" if self.scope is None else f"s:{self.scope}"


def list_scopes(backend: Backend) -> list[ScopeItem]:
    """The own store, each own domain, each room the reader belongs to."""
    items = [ScopeItem(None, "Own store", "own")]
    items += [ScopeItem(domain, domain, "domain") for domain in backend.domains()]
    items += [ScopeItem(room.address, room.name, "room", room) for room in backend.rooms()]
    return items


def count_new(backend: Backend, unread: Start, scope: str | None, cap: int = COUNT_CAP) -> int:
    """Entries new to the reader (`unread`, from its watermark), walked by cursor and counted up to `cap + 1`."""
    return len(new_ids(backend, unread, scope, cap))


def new_ids(backend: Backend, unread: Start, scope: str | None, cap: int = COUNT_CAP) -> list[str]:
    """The ids of the entries new to the reader (`unread`, from its watermark), newest first, up to `cap + 1`.

    The walk `catchup` makes, stopped past the cap: a scope of a million entries costs one or two pages.
    """
    found: list[str] = []
    walk = Walk(backend, RecentQuery(scope=scope, since=unread.since, limit=MAX_LIMIT), held=unread.held)
    for fresh in walk.pages():
        found += [entry.atom_id for entry in fresh]
        if len(found) > cap:
            break
    return found[: cap + 1]


def format_count(count: int, cap: int = COUNT_CAP) -> str:
    """`12`, or `99+` past the cap, or blank for none."""
    if count <= 0:
        return ""
    return f"{cap}+" if count > cap else str(count)


def load_watermark(
    state: StateDB | ServerWatermarks, backend: Backend, consumer: str, scope: str | None
) -> Watermark | None:
    """This consumer's watermark for a scope on this backend and principal."""
    return state.load(StateKey.of(backend, consumer, scope))


class Activity(Value):
    """Entries per time bucket, oldest first, each counted up to a cap; and what the buckets span."""

    counts: tuple[int, ...]
    bucket: int
    label: str
    capped: bool

    @property
    def unit(self) -> str:
        return UNITS[self.bucket]

    @property
    def heights(self) -> list[float]:
        """The counts on a log scale: a quiet bucket still shows beside a busy one, and zero stays zero."""
        return [math.log1p(c) for c in self.counts]


MINUTE = 60_000_000
FILL = 0.8  # the share of a bucket's cap its expected count may reach
# Bucket widths from fine to coarse, and how many of each the picture shows.
LADDER = ((MINUTE, 30), (5 * MINUTE, 24), (15 * MINUTE, 24), (HOUR, 24), (DAY, 30))
UNITS = {MINUTE: "min", 5 * MINUTE: "5 min", 15 * MINUTE: "15 min", HOUR: "hour", DAY: "day"}
EACH = {MINUTE: "by minute", 5 * MINUTE: "by 5 min", 15 * MINUTE: "by 15 min", HOUR: "hourly", DAY: "daily"}
SPANS = {MINUTE: "30 min", 5 * MINUTE: "2 h", 15 * MINUTE: "6 h", HOUR: "24 h", DAY: "30 days"}


def bucket_width(newest: int | None, oldest_of_page: int | None, page: int = MAX_LIMIT) -> int:
    """The bucket width that fits the scope's pace: the coarsest one a bucket is not expected to fill.

    The first page's span gives the pace (`page` entries in that time). With one width for every
    scope, the buckets of a busy one would all be capped and draw a flat line.
    """
    if newest is None or oldest_of_page is None:
        return DAY
    span = max(newest - oldest_of_page, 1)
    for width, _ in reversed(LADDER):
        if width * page / span <= FILL * COUNT_CAP:
            return width
    return LADDER[0][0]


def activity(
    backend: Backend,
    scope: str | None,
    now: int,
    newest: int | None,
    oldest_of_page: int | None,
    bucket: int | None = None,
) -> Activity:
    """Entries over time for a scope: one bounded read per bucket, so the cost does not grow with the scope.

    The bucket width follows the scope's pace (`bucket_width`), unless `bucket` gives it (a picture read
    again keeps its width); each bucket is counted up to one page (100).
    """
    width = bucket or bucket_width(newest, oldest_of_page)
    n = dict(LADDER)[width]
    counts: list[int] = []
    capped = False
    for i in range(n, 0, -1):
        low = now - i * width
        high = low + width - 1
        if newest is None or low > newest:
            counts.append(0)
            continue
        page = backend.recent(RecentQuery(scope=scope, since=low, until=high, limit=MAX_LIMIT))
        counts.append(len(page.items))
        capped = capped or page.next_cursor is not None
    return Activity(tuple(counts), width, f"{SPANS[width]}, {EACH[width]}", capped)
