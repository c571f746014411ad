"""Provides the values of removals: one tombstone as a consumer reads it, and a read of them (docs/architecture.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnemo_tui import timefmt

if TYPE_CHECKING:
    from typing import Any

REREAD = (
    "the watermark of consumer {consumer!r} on {scope} is older than the removals this store keeps (their retention): "
    "entries may have been removed unseen; re-read this scope (`mnemo watermark reset{flags}`, then `mnemo catchup`)"
)
NO_TOMBSTONES = (
    "this endpoint keeps no removals (no tombstones: the hosted service and its peers report none): "
    "`--changes` cannot say what was removed; run `mnemo catchup` without it"
)


class Removal:
    """One removed entry: its id, its scope (the entry's domain or room address), when (the bucket's clock) and why."""

    __slots__ = ("atom_id", "reason", "removed_at", "scope")

    def __init__(self, atom_id: str, scope: str, removed_at: int, reason: str) -> None:
        self.atom_id = atom_id
        self.scope = scope
        self.removed_at = removed_at
        self.reason = reason

    def wire(self) -> dict[str, Any]:
        """CLI.md's removal object (and the server's extension, docs/server.md)."""
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

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Removal) and (self.atom_id, self.removed_at) == (other.atom_id, other.removed_at)

    def __hash__(self) -> int:
        return hash((self.atom_id, self.removed_at))

    def __repr__(self) -> str:
        return f"Removal({self.atom_id!r}, {self.scope!r}, {self.removed_at}, {self.reason!r})"


class Removals:
    """The removals of one scope in a window, oldest first; `gone`: some newer than its low bound were dropped."""

    __slots__ = ("gone", "items")

    def __init__(self, items: list[Removal], gone: bool) -> None:
        self.items = items
        self.gone = gone

    @property
    def newest(self) -> int | None:
        return self.items[-1].removed_at if self.items else None
