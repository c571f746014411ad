"""Provides the values of a push follow (docs/server.md, "Push follow"): one event as the client reads it, and an open follow."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from mnemo_tui.values.model import Value

if TYPE_CHECKING:
    from mnemo_tui.values.model import Entry
    from mnemo_tui.values.removals import Removal


class Pushed(Value):
    """One event of a follow: `entries` (newest first), `removed` (oldest first) or `heartbeat`, with the
    position the stream stood at after it (opaque: resume from it). A wake's events come oldest part first."""

    kind: str
    position: str | None
    entries: list[Entry]
    removals: list[Removal]


class Follow(Protocol):
    """An open follow: iterate it for its events (it reconnects by itself); `close()`, from any thread, ends it.

    `on_connection`, when set, is called in the iterating thread with a few words of why as soon as a stream
    ends or drops and reconnecting begins (once an outage), then with None before the first event a
    reconnect brings. `deadline` is how many seconds reconnecting may last before the follow gives up,
    unless `persistent` is set (before iterating): then it reconnects until closed, and `on_connection`
    hears at doubling intervals that the outage goes on.
    """

    on_connection: Callable[[str | None], object] | None
    persistent: bool

    @property
    def deadline(self) -> float: ...

    def __iter__(self) -> Iterator[Pushed]: ...

    def __next__(self) -> Pushed: ...

    def close(self) -> None: ...
