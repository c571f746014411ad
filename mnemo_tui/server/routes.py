"""Provides the endpoints of docs/server.md for the feed, writes, rooms, the vault and single entries: each a plain
function run in a database thread as the key's principal (searches: `search_routes`; the rest of the memory
plane: `plane_routes`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from mnemo_tui import timefmt
from mnemo_tui.engine.interface import Engine
from mnemo_tui.errors import Timeout
from mnemo_tui.server import bodies
from mnemo_tui.server.bodies import M, require_uuid
from mnemo_tui.server.envelope import JSON, Raw, dumps
from mnemo_tui.values.model import RecentQuery, Value
from mnemo_tui.values.writes import WriteRequest

T = TypeVar("T")
DUPLICATE_REASON = "duplicate external_ref: the first atom was returned"
NONE: Mapping[str, str] = MappingProxyType({})  # no parameters or headers (one default, read-only: shared)


class Call(Value):
    """One request as the endpoint functions see it: the raw body, the path parameters, the headers an
    endpoint reads."""

    raw: bytes = b""
    params: Mapping[str, str] = NONE
    headers: Mapping[str, str] = NONE

    def body(self, model: type[M]) -> M:
        """The body read as `model` (`bodies.parse`: 422 when it does not fit, 400 when it is not JSON)."""
        return bodies.parse(model, self.raw)


def parse_time(value: str | None) -> int | None:
    """A wire time (ISO 8601) as microseconds since the epoch; None stays None."""
    return None if value is None else timefmt.parse_iso(value)


def _cursor_json(cursor: str | None) -> bytes:
    return b"null" if cursor is None else b'"' + cursor.encode() + b'"'


# -- the feed -------------------------------------------------------------------------------


def recent_query(call: Call) -> RecentQuery:
    """The feed read a `POST /memory/recent` body asks for (422 when it does not fit)."""
    b = call.body(bodies.Recent)
    # Every field in order (scope, since, until, exclude_author, limit, cursor, include_history, author): the
    # quick way to build a `Value`, once per request.
    return RecentQuery(
        b.domain, parse_time(b.since), parse_time(b.until), b.exclude_author, b.limit, b.cursor, b.include_history, None
    )


# A JSON page's bound on its items' text: one no page meets (SQLite's own is below it), so none is cut short.
PAGE_BYTES = 1 << 30


def page_pieces(items: bytes, cursor: str | None) -> tuple[bytes, bytes, bytes, bytes, bytes]:
    """A page's `RecentResponse` in the pieces it is joined from, given its items' text joined (so a streamed
    walk joins a whole part's lines in one copy)."""
    return b'{"items":[', items, b'],"next_cursor":', _cursor_json(cursor), b"}"


def recent(engine: Engine, who: str, call: Call) -> bytes:
    """`POST /memory/recent`: one page of the feed, its items' texts joined by the engine as a streamed walk's
    (`Engine.recent_wire_pages`: on SQLite in its statement, one value a page rather than three objects a row)."""
    page = engine.recent_wire_pages(who, recent_query(call), 1, PAGE_BYTES)[0]
    return b"".join(page_pieces(page.items, page.next_cursor))


# -- writes ---------------------------------------------------------------------------------


def write_request(b: bodies.Write) -> WriteRequest:
    author = b.author
    # Every field in order, as `WriteRequest` declares them: the quick way to build a `Value`, once per request.
    return WriteRequest(
        b.content,
        b.domain,
        tuple(b.concepts),
        b.metadata if "metadata" in b.model_fields_set else None,  # metadata
        b.external_ref,
        tuple(str(old) for old in b.supersedes) if b.supersedes else (),
        None if author is None else author.agent,
        None if author is None else author.agent_name,
        (None if author is None else author.client_env) or "api",  # client_env
        b.fingerprint,
    )


def write(engine: Engine, who: str, call: Call) -> Raw:
    """`POST /memory/write`: the principal comes from the key; `author` may name the agent only."""
    result = engine.write(who, write_request(call.body(bodies.Write)))
    # `{"stored": true, "atom_id": ..., "importance": 0.0, "reason": ..., "superseded": [...]}` as `dumps` spells
    # it, made by hand as a page is (the encoder's set-up for a value this small cost more than the write's SQL).
    reason = "" if result.created else DUPLICATE_REASON
    superseded = ",".join(map(json_text, result.superseded))
    text = f'{{"stored":true,"atom_id":{json_text(result.atom_id)},"importance":0.0,"reason":"{reason}","superseded":[{superseded}]}}'
    return Raw(text.encode(), JSON)


def json_text(text: str) -> str:
    """`text` as a JSON string, as `dumps` spells it: between quotes as it is when nothing in it takes an escape
    (an atom id), else escaped by `dumps`."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return '"' + text + '"'
    return dumps(text).decode()


# -- rooms ----------------------------------------------------------------------------------


def rooms_list(engine: Engine, who: str, call: Call) -> list[dict[str, Any]]:
    """`GET /memory/rooms`: owned rooms, then joined ones."""
    return [r.wire() for r in engine.list_rooms(who)]


def rooms_create(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /memory/rooms`."""
    b = call.body(bodies.CreateRoom)
    room = engine.create_room(who, b.name, b.description)
    return room.created(
        f"Write and read with domain {room.address}. Bring others in with an invite: "
        f"POST /memory/rooms/{room.room_id}/invites (mnemo rooms invite {room.address})."
    )


def rooms_invite(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /memory/rooms/{room_id}/invites` (owner only; an unknown room reads like a foreign one)."""
    b = call.body(bodies.CreateInvite)
    room_id = call.params["room_id"]
    invite = engine.create_invite(who, room_id, scope=b.scope, expires_days=b.expires_in_days, max_uses=b.max_uses)
    return invite.wire()


def rooms_join(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /memory/rooms/join`: joining twice is a no-op success."""
    joined = engine.join(who, call.body(bodies.JoinRoom).code)
    return joined.wire(f"Read it with domain {joined.address} (mnemo recent --scope {joined.address}).")


def whole_delete(what: str, delete: Callable[[], T], parts: bool = False) -> T:
    """A deletion of many entries, which is one transaction: past the deadline it is rolled back whole,
    and the answer says so and what to do (docs/server.md)."""
    try:
        return delete()
    except Timeout as exc:
        seconds = exc.details.get("limit_seconds", 0) if exc.details else 0
        raise Timeout(
            f"deleting {what} ran past the request's {seconds:g} s limit and was rolled back whole: nothing was "
            "deleted; retry when the server is less busy"
            + (", or delete some of its entries first (DELETE /memory/atoms/{atom_id})" if parts else ""),
            details=exc.details,
        ) from None


def rooms_delete(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`DELETE /memory/rooms/{room_id}`: our extension (the hosted plane has none); owner only, the room's
    entries, invites and members go with it; an unknown room reads like a foreign one (403)."""
    room_id = call.params["room_id"]
    deleted = whole_delete("the room", lambda: engine.delete_room(who, room_id))
    return {"room_id": room_id, "deleted": deleted, "status": "deleted"}


# -- vault ----------------------------------------------------------------------------------


def vault_list(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`GET /vault/secrets`: aliases, context, time and concepts; never a value."""
    return {"secrets": [s.wire() for s in engine.vault_list(who)]}


def vault_add(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /vault/secrets`: the sealed value is stored and never returned."""
    b = call.body(bodies.CreateSecret)
    atom = engine.vault_add(who, b.alias, b.context, b.sealed_secret_b64, tuple(b.concepts))
    return {"atom_id": atom, "alias": b.alias}


def vault_sealed(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`GET /vault/secrets/by-alias/{alias}`: only the sealed value (never the context); the client unseals it."""
    alias = call.params["alias"]
    return {"alias": alias, "sealed_secret_b64": engine.vault_sealed(who, alias)}


# -- single atoms and domains ------------------------------------------------------------------


def atom_get(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`GET /memory/atoms/{atom_id}`: the wire item plus the hosted service's detail fields."""
    atom = require_uuid(call.params["atom_id"], "atom_id")
    entry = engine.get(who, atom)
    metadata, external_ref = engine.atom_extras([atom]).get(atom, ({}, None))
    item = dict(entry.data)
    item.update(
        id=entry.atom_id,
        atom_type="episode",
        last_accessed_at=item["created_at"],
        access_count=0,
        importance=0.0,
        valence=0.0,
        outcome_count=0,
        is_protected=False,
        external_ref=external_ref,
        metadata=metadata,
    )
    item.setdefault("supersedes", [])
    item.setdefault("superseded_by", None)
    return item


def atom_delete(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`DELETE /memory/atoms/{atom_id}`: administrative; `{"deleted": 0|1}`."""
    atom = require_uuid(call.params["atom_id"], "atom_id")
    return {"deleted": engine.delete(who, atom)}


def domains(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`GET /memory/domains`: the caller's own domains."""
    return {"domains": engine.domains(who)}
