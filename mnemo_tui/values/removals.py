"""Provides the values of removals: one tombstone as a consumer reads it, and a read of them (docs/architecture.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnemo_tui import timefmt
from mnemo_tui.values.model import Value

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# A page's position: its last removal, `(removed_at, atom_id)` (one delete of a set leaves it all at one instant).
Position = tuple[int, str]
PAGE = 1000  # removals a reader asks for at a time (the server's most per page, docs/server.md)
MAX_PAGES = 100_000  # a reader's bound on one read (100 million removals): past it the store is not paging

REREAD = (
    "the watermark of consumer {consumer!r} on {scope} is older than the removals this store keeps (their retention): "
    "entries may have been removed unseen; re-read this scope (`mnemo watermark reset{flags}`, then `mnemo catchup`)"
)
NO_TOMBSTONES = (
    "this endpoint keeps no removals (no tombstones: the hosted service and its peers report none): "
    "`--changes` cannot say what was removed; run `mnemo catchup` without it"
)


class Removal(Value):
    """One removed entry: its id, its scope (the entry's domain or room address), when (the bucket's clock) and why."""

    atom_id: str
    scope: str
    removed_at: int
    reason: str

    def wire(self) -> dict[str, Any]:
        """docs/cli.md's removal object (and the server's extension, docs/server.md)."""
        return {
            "atom_id": self.atom_id,
            "scope": self.scope,
            "removed_at": timefmt.to_iso(self.removed_at),
            "reason": self.reason,
        }

    @classmethod
    def from_wire(cls, item: dict[str, Any]) -> Removal:
        return cls(
            str(item["atom_id"]),
            str(item["scope"]),
            timefmt.parse_iso(str(item["removed_at"]), field="removed_at"),
            str(item["reason"]),
        )


class Removals(Value):
    """The removals of one scope in a window, oldest first; `gone`: some newer than its low bound were dropped;
    `next`: the position to read the rest from, when this is one page of more."""

    items: list[Removal]
    gone: bool
    next: Position | None = None

    @property
    def newest(self) -> int | None:
        return self.items[-1].removed_at if self.items else None


def position_wire(position: Position | None) -> str | None:
    """A position as the server hands it out: `<removed_at in microseconds>/<atom_id>`, opaque to clients."""
    return None if position is None else f"{position[0]}/{position[1]}"


def position_of(text: str) -> Position:
    """A position of `position_wire`.

    Raises:
        ValueError: not one.
    """
    at, sep, atom = text.partition("/")
    if not sep or not atom or len(atom) > 200 or not at.lstrip("-").isdigit():
        raise ValueError(f"not a removals position: {text[:80]!r}")
    return int(at), atom


def read_pages(read: Callable[[Position | None], Removals]) -> Removals:
    """Every removal of a window, read a page at a time by `read` (from a position, None: the window's start):
    each page starts after the last one's position, so none is lost or repeated; `gone` on any page is the
    answer (the window cannot be told whole).

    Raises:
        ValueError: a page whose position does not move on (a read that would never end).
    """
    items: list[Removal] = []
    start: Position | None = None
    for _ in range(MAX_PAGES):
        page = read(start)
        if page.gone:
            return Removals([], gone=True)
        items.extend(page.items)
        if page.next is None:
            return Removals(items, gone=False)
        if start is not None and page.next <= start:
            break
        start = page.next
    raise ValueError("the removals' pages do not move on")
