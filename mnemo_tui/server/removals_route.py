"""Provides `POST /memory/removals`: mnemo serve's extension of the dialect that reads tombstones (docs/server.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from mnemo_tui import timefmt
from mnemo_tui.errors import RemovalsGone, Unprocessable, ValidationError
from mnemo_tui.limits import parse_scope
from mnemo_tui.server.bodies import Instant, _Body
from mnemo_tui.server.envelope import dumps
from mnemo_tui.values.removals import PAGE, position_of, position_wire

if TYPE_CHECKING:
    from mnemo_tui.engine.interface import Engine
    from mnemo_tui.server.routes import Call

GONE = "removals newer than `after` were dropped (past the store's retention): re-read this scope"
MAX_PAGE = PAGE  # the most removals a request may ask for (`limit`)
# Removals answered whole to a request without `limit` (an older client): past it a 422 asks for `limit`,
# so that client fails loudly instead of committing past removals it did not see.
UNPAGED = 10_000
LIMIT_REQUIRED = (
    f"more than {UNPAGED} removals in this window: ask with `limit` (at most {MAX_PAGE}) and read on from `next`"
)


class RemovalsBody(_Body):
    """`RemovalsRequestSchema`: a scope (as `domain` of a feed request), the window `(after, upto]`, and a page
    (`limit`, and `next` from the page before)."""

    domain: Annotated[str, Field(max_length=200)] | None = None
    after: Instant | None = None
    upto: Instant | None = None
    limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] | None = None
    next: Annotated[str, Field(max_length=240)] | None = None


def removals(engine: Engine, who: str, call: Call) -> bytes:
    """One page of the removals of a scope in `(after, upto]`, oldest first, and the position of the rest
    (`next`, null at the end); 410 `REMOVALS_GONE` past the retention, 422 past `UNPAGED` without `limit`."""
    b = call.body(RemovalsBody)
    after = None if b.after is None else timefmt.parse_iso(b.after)
    upto = None if b.upto is None else timefmt.parse_iso(b.upto)
    try:
        start = None if b.next is None else position_of(b.next)
    except ValueError:
        # What the schema cannot say (an opaque position), as a forged cursor: 400, never 422.
        raise ValidationError("next: not a position this server handed out", details={"field": "next"}) from None
    limit = UNPAGED if b.limit is None else b.limit
    found = engine.removals(who, parse_scope(b.domain), after, upto, limit=limit, start=start)
    if found.gone:
        raise RemovalsGone(GONE, details={"reason": "removals_gone"})
    if b.limit is None and found.next is not None:
        raise Unprocessable(LIMIT_REQUIRED, details={"reason": "limit_required", "most": UNPAGED})
    return dumps({"removed": [r.wire() for r in found.items], "next": position_wire(found.next)})
