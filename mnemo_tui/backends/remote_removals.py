"""Provides the remote backend's read of removals: `POST /memory/removals`, mnemo serve's extension (docs/server.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mnemo_tui.backends.remote_wire import wire_time
from mnemo_tui.errors import NotFound, RemovalsGone, Unavailable
from mnemo_tui.removals import Removal, Removals

if TYPE_CHECKING:
    from collections.abc import Callable

PATH = "/memory/removals"


def removals(
    call: Callable[..., Any], identity: str, scope: str | None, after: int | None, upto: int | None
) -> Removals | None:
    """The removals of a scope in `(after, upto]` through `call` (the backend's `_call`); None when the
    endpoint has no such extension (the hosted service answers 404: it keeps no tombstones)."""
    try:
        answer = call("POST", PATH, {"domain": scope, "after": wire_time(after), "upto": wire_time(upto)})
    except NotFound:
        return None
    except RemovalsGone:
        return Removals([], gone=True)
    try:
        return Removals([Removal.from_wire(item) for item in answer["removed"]], gone=False)
    except (KeyError, TypeError, ValueError):
        raise Unavailable(f"{identity} answered POST {PATH} with a body that is not a list of removals") from None
