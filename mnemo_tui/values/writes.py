"""Provides the values of a write: what is asked, and what the store did."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnemo_tui.values.model import Value

if TYPE_CHECKING:
    from typing import Any


class WriteRequest(Value):
    """The arguments of one write (docs/server.md `POST /memory/write`)."""

    content: str
    domain: str = "general"
    concepts: tuple[str, ...] = ()
    metadata: dict[str, Any] | None = None
    external_ref: str | None = None
    supersedes: tuple[str, ...] = ()
    agent: str | None = None
    agent_name: str | None = None
    client_env: str | None = "cli"
    fingerprint: str | None = None


class KeptWrite(WriteRequest, kw_only=True):
    """A write that keeps an entry's id and author: an import onto an engine (`mnemo import`, docs/export.md)."""

    atom_id: str
    author: str


class WriteResult(Value):
    """What a write returned: the atom's id, and the ids it superseded."""

    atom_id: str
    superseded: tuple[str, ...] = ()
    created: bool = True
