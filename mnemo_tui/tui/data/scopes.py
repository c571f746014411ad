"""Provides the sidebar's data: the scopes a reader has, their counts of new entries, and activity over time."""

from __future__ import annotations

from dataclasses import dataclass

from mnemo_tui.backends import Backend
from mnemo_tui.model import MAX_LIMIT, RecentQuery, Watermark
from mnemo_tui.state.statedb import StateDB, StateKey
from mnemo_tui.walk import Start, Walk

COUNT_CAP = 99
HOUR = 3_600_000_000
DAY = 24 * HOUR


@dataclass(frozen=True)
class ScopeItem:
    """One line of the sidebar: a scope and how to show it."""

    scope: str | None
    label: str
    kind: str  # "own", "domain" or "room"

    @property
    def key(self) -> str:
        """A stable option id for the scope."""
        return "own" if self.scope is None else f"s:{self.scope}"


def list_scopes(backend: Backend) -> list[ScopeItem]:
    """The own store, each own domain, each room the reader belongs to."""
    items = [ScopeItem(None, "Own store", "own")]
    items += [ScopeItem(domain, domain, "domain") for domain in backend.domains()]
    items += [ScopeItem(room.address, room.name, "room") for room in backend.rooms()]
    return items


def count_new(backend: Backend, unread: Start, scope: str | None, cap: int = COUNT_CAP) -> int:
    """Entries new to the reader (`unread`, from its watermark), walked by cursor and counted up to `cap + 1`.

    A scope of a million entries costs one or two pages: the count stops past the cap.
    """
    count = 0
    walk = Walk(backend, RecentQuery(scope=scope, since=unread.since, limit=MAX_LIMIT), held=unread.held)
    for fresh in walk.pages():
        count += len(fresh)
        if count > cap:
            break
    return count


def format_count(count: int, cap: int = COUNT_CAP) -> str:
    """`12`, or `99+` past the cap, or blank for none."""
    if count <= 0:
        return ""
    return f"{cap}+" if count > cap else str(count)


def load_watermark(state: StateDB, backend: Backend, consumer: str, scope: str | None) -> Watermark | None:
    """This consumer's watermark for a scope on this backend and principal."""
    return state.load(StateKey.of(backend, consumer, scope))


@dataclass(frozen=True)
class Activity:
    """Entries per time bucket, oldest first, each counted up to a cap; and what the buckets span."""

    counts: tuple[int, ...]
    bucket: int
    label: str
    capped: bool


def activity(backend: Backend, scope: str | None, now: int, newest: int | None, oldest_of_page: int | None) -> Activity:
    """Entries over time for a scope: one bounded read per bucket, so the cost does not grow with the scope.

    Hourly buckets over a day when the scope's first page spans less than a day (a busy scope),
    else daily buckets over 30 days. Each bucket is counted up to one page (100).
    """
    busy = newest is not None and oldest_of_page is not None and newest - oldest_of_page < DAY
    width, n, label = (HOUR, 24, "last 24 h, per hour") if busy else (DAY, 30, "last 30 days, per day")
    end = now
    counts: list[int] = []
    capped = False
    for i in range(n, 0, -1):
        low = end - i * width
        high = low + width - 1
        if newest is None or low > newest:
            counts.append(0)
            continue
        page = backend.recent(RecentQuery(scope=scope, since=low, until=high, limit=MAX_LIMIT))
        counts.append(len(page.items))
        capped = capped or page.next_cursor is not None
    return Activity(tuple(counts), width, label, capped)
