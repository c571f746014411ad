"""Provides the remote backend's read of removals: `POST /memory/removals`, mnemo serve's extension (docs/server.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mnemo_tui.backends.remote_wire import wire_time
from mnemo_tui.errors import NotFound, RemovalsGone, Unavailable
from mnemo_tui.values.removals import PAGE, Position, Removal, Removals, position_of, position_wire, read_pages

if TYPE_CHECKING:
    from collections.abc import Callable

PATH = "/memory/removals"


def removals(
    call: Callable[..., Any], identity: str, scope: str | None, after: int | None, upto: int | None
) -> Removals | None:
    """The removals of a scope in `(after, upto]` through `call` (the backend's `_call`), a page at a time;
    None when the endpoint has no such extension (the hosted service answers 404: it keeps no tombstones).
    A server older than paging ignores `limit` and answers all in one body, without `next`."""
    window = {"domain": scope, "after": wire_time(after), "upto": wire_time(upto), "limit": PAGE}

    def page(start: Position | None) -> Removals:
        try:
            answer = call("POST", PATH, {**window, "next": position_wire(start)})
        except RemovalsGone:
            return Removals([], gone=True)
        try:
            following = answer.get("next")
            return Removals(
                [Removal.from_wire(item) for item in answer["removed"]],
                gone=False,
                next=None if following is None else position_of(str(following)),
            )
        except (AttributeError, KeyError, TypeError, ValueError):
            raise Unavailable(f"{identity} answered POST {PATH} with a body that is not a page of removals") from None

    try:
        return read_pages(page)
    except NotFound:
        return None
    except ValueError:
        raise Unavailable(f"{identity} answered POST {PATH} with pages that do not move on") from None
