"""Provides the values of removals: one tombstone as a consumer reads it, and a read of them (docs/architecture.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnemo_tui import timefmt
from mnemo_tui.model import Value

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


class Removal(Value):
    """One removed entry: its id, its scope (the entry's domain or room address), when (the bucket's clock) and why."""

    atom_id: str
    scope: str
    removed_at: int
    reason: str

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


class Removals(Value):
    """The removals of one scope in a window, oldest first; `gone`: some newer than its low bound were dropped."""

    items: list[Removal]
    gone: bool

    @property
    def newest(self) -> int | None:
        return self.items[-1].removed_at if self.items else None
