"""Provides `/api/v1/mnemo/consumers`: durable consumers kept by the server, mnemo's extension (docs/consumers.md).

`GET /mnemo/consumers` lists the key's principal's positions with their lag; `GET /mnemo/consumers/{consumer}`
one consumer's positions (every scope); `POST /mnemo/consumers/{consumer}` commits one scope's position as a
compare-and-set on `expected` (409 `CONSUMER_MOVED` with the stored position when it differs), or with
`unconditional` (`position: null` forgets that scope's); `DELETE /mnemo/consumers/{consumer}` forgets it on
every scope. A key reads and writes its own principal's consumers only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from mnemo_tui import timefmt
from mnemo_tui.engine.consumers import MAX_BOUNDARY, MAX_HOST, Position, check_consumer
from mnemo_tui.errors import ConsumerMoved, NotFound, ValidationError
from mnemo_tui.limits import parse_scope
from mnemo_tui.server.bodies import Instant, _Body

if TYPE_CHECKING:
    from mnemo_tui.engine.interface import Engine
    from mnemo_tui.server.routes import Call

PATH = "/mnemo/consumers"
ONE = PATH + "/{consumer:segment}"
UNKNOWN = "this consumer has no position on any scope (its first pass starts by its start policy)"
UNKNOWN_REASON = "unknown_consumer"
FORGET = "position null forgets the scope's position: only with unconditional true (`watermark reset`)"
MOVED = "another pass of this consumer committed first: this pass's watermark did not move"


def position_wire(p: Position) -> dict[str, Any]:
    """A position as the wire carries it (`ConsumerPositionSchema`)."""
    return {
        "consumer": p.consumer,
        "scope": p.scope,
        "created_at": None if p.created_at is None else timefmt.to_iso(p.created_at),
        "boundary_ids": list(p.boundary_ids),
        "updated_at": timefmt.to_iso(p.updated_at),
        "host": p.host,
    }


class Mark(_Body):
    """A watermark: its instant and the ids delivered at it (`ConsumerMarkSchema`)."""

    created_at: Instant | None = None
    boundary_ids: Annotated[tuple[Annotated[str, Field(max_length=64)], ...], Field(max_length=MAX_BOUNDARY)] = ()


class CommitBody(_Body):
    """`ConsumerCommitRequestSchema`: the scope, the new position, and the one the pass started from."""

    scope: Annotated[str, Field(max_length=200)] | None = None
    position: Mark | None
    expected: Mark | None = None
    unconditional: bool = False
    host: Annotated[str, Field(max_length=MAX_HOST)] = ""


def _mark(m: Mark) -> tuple[int | None, tuple[str, ...]]:
    return (None if m.created_at is None else timefmt.parse_iso(m.created_at), m.boundary_ids)


def _name(call: Call) -> str:
    return check_consumer(call.params["consumer"])


def listing(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`GET /mnemo/consumers`: every position of the principal, each with its lag."""
    found = []
    for p in engine.consumers(who):
        lag = engine.consumer_lag(who, p)
        found.append({**position_wire(p), "behind_entries": lag.entries, "behind_seconds": lag.seconds})
    return {"consumers": found}


def show(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`GET /mnemo/consumers/{consumer}`: the consumer's positions, one per scope; 404 `NOT_FOUND` with
    `details.reason` `unknown_consumer` when it has none (a client tells it from an endpoint without consumers)."""
    name = _name(call)
    found = engine.consumers(who, name)
    if not found:
        raise NotFound(UNKNOWN, details={"reason": UNKNOWN_REASON})
    return {"consumer": name, "positions": [position_wire(p) for p in found]}


def commit(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /mnemo/consumers/{consumer}`: the compare-and-set (409 `CONSUMER_MOVED` with the stored position)."""
    name = _name(call)
    b = call.body(CommitBody)
    scope = parse_scope(b.scope)
    if b.position is None:
        if not b.unconditional:
            raise ValidationError(FORGET, details={"field": "position"})
        engine.consumer_delete(who, name, scope)
        return {"position": None}
    created_at, ids = _mark(b.position)
    expected = None if b.expected is None else _mark(b.expected)
    moved, stored = engine.consumer_commit(
        who, name, scope, created_at, ids, expected=expected, unconditional=b.unconditional, host=b.host
    )
    now = None if stored is None else position_wire(stored)
    if not moved:
        raise ConsumerMoved(MOVED, details={"reason": "consumer_moved", "position": now})
    return {"position": now}


def delete(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`DELETE /mnemo/consumers/{consumer}`: the consumer is forgotten on every scope (one scope: a commit of
    `position: null`)."""
    return {"deleted": engine.consumer_delete(who, _name(call), None, every_scope=True)}
