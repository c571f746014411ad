"""Provides what listings show of the vault's secrets and of API keys: never a value, never a key."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnemo_tui import timefmt
from mnemo_tui.values.model import Value

if TYPE_CHECKING:
    from typing import Any


class SecretInfo(Value):
    """A vault entry as listings show it: never the value."""

    alias: str
    context: str
    created_at: int
    concepts: tuple[str, ...] = ()

    def wire(self) -> dict[str, Any]:
        """The wire `SecretListItem`: alias, context, time and concepts (there is no value to show)."""
        return {
            "alias": self.alias,
            "context": self.context,
            "created_at": timefmt.to_iso(self.created_at),
            "concepts": list(self.concepts),
        }


class KeyInfo(Value):
    """An API key as listings show it: never the key."""

    key_id: str
    principal: str
    created_at: int
    revoked: bool

    def wire(self) -> dict[str, Any]:
        """docs/cli.md's `keys list` item."""
        return {
            "key_id": self.key_id,
            "principal": self.principal,
            "created_at": timefmt.to_iso(self.created_at),
            "revoked": self.revoked,
        }
