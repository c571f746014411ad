"""Provides `POST /memory/removals`: mnemo serve's extension of the dialect that reads tombstones (docs/server.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from mnemo_tui import timefmt
from mnemo_tui.errors import RemovalsGone
from mnemo_tui.limits import parse_scope
from mnemo_tui.server.bodies import Instant, _Body
from mnemo_tui.server.envelope import dumps

if TYPE_CHECKING:
    from mnemo_tui.engine.interface import Engine
    from mnemo_tui.server.routes import Call

GONE = "removals newer than `after` were dropped (past the store's retention): re-read this scope"


class RemovalsBody(_Body):
    """`RemovalsRequestSchema`: a scope (as `domain` of a feed request) and the window `(after, upto]`."""

    domain: Annotated[str, Field(max_length=200)] | None = None
    after: Instant | None = None
    upto: Instant | None = None


def removals(engine: Engine, who: str, call: Call) -> bytes:
    """The removals of one scope in `(after, upto]`, oldest first; 410 `REMOVALS_GONE` past the retention."""
    b = call.body(RemovalsBody)
    after = None if b.after is None else timefmt.parse_iso(b.after)
    upto = None if b.upto is None else timefmt.parse_iso(b.upto)
    found = engine.removals(who, parse_scope(b.domain), after, upto)
    if found.gone:
        raise RemovalsGone(GONE, details={"reason": "removals_gone"})
    return dumps({"removed": [r.wire() for r in found.items]})
