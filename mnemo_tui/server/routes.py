"""Provides the endpoints of WIRE.md: each a plain function run in a database thread as the key's principal."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from mnemo_tui import timefmt
from mnemo_tui.engine.interface import Engine
from mnemo_tui.errors import ValidationError
from mnemo_tui.model import ROOM_PREFIX, RecentQuery, SearchQuery, WriteRequest
from mnemo_tui.server.validate import BodyInvalid, require, require_uuid

DUPLICATE_REASON = "duplicate external_ref: the first atom was returned"
MAX_ANSWER = 16 << 20  # bytes one search answer may hold (read, read-batch, query)


@dataclass(frozen=True)
class Call:
    """One request as the endpoint functions see it: the raw body and the path parameters."""

    raw: bytes = b""
    params: dict[str, str] = field(default_factory=dict)

    def body(self) -> Any:
        """The parsed JSON body (an empty body reads as `{}`).

        Raises:
            ValidationError: the body is not JSON.
        """
        if not self.raw.strip():
            return {}
        try:
            value = json.loads(self.raw, parse_constant=_no_constant)
        except _NotJson as exc:
            raise BodyInvalid([{"type": "json_invalid", "loc": ["body"], "msg": str(exc)}]) from None
        except (ValueError, UnicodeDecodeError):
            raise ValidationError("request body is not valid JSON") from None
        except RecursionError:
            raise ValidationError("request body is nested too deeply") from None
        where = _lone_surrogate(value, ("body",))
        if where is not None:
            loc = list(where)
            raise BodyInvalid([{"type": "string_unicode", "loc": loc, "msg": "Input should be valid Unicode text"}])
        return value


class _NotJson(ValueError):
    """NaN, Infinity and -Infinity: Python reads them, JSON has no such numbers."""


def _no_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not a JSON number")


def _lone_surrogate(value: Any, loc: tuple[str | int, ...]) -> tuple[str | int, ...] | None:
    """Where a string holds a lone surrogate (a `\\ud800` escape): text that cannot be stored or sent."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return loc
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _lone_surrogate(key, loc) or _lone_surrogate(item, (*loc, key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _lone_surrogate(item, (*loc, index))
            if found is not None:
                return found
    return None


def _time(value: str | None) -> int | None:
    return None if value is None else timefmt.parse_iso(value)


def _cursor_json(cursor: str | None) -> bytes:
    return b"null" if cursor is None else b'"' + cursor.encode() + b'"'


# -- the feed -------------------------------------------------------------------------------


def recent(engine: Engine, who: str, call: Call) -> bytes:
    """`POST /memory/recent`: one page of the feed, the stored wire items joined as they are."""
    b = require("RecentRequestSchema", call.body())
    query = RecentQuery(
        scope=b.get("domain"),
        since=_time(b.get("since")),
        until=_time(b.get("until")),
        exclude_author=b.get("exclude_author"),
        limit=int(b["limit"]),
        cursor=b.get("cursor"),
        include_history=bool(b["include_history"]),
    )
    page = engine.recent_wire(who, query)
    return b'{"items":[' + ",".join(page.items).encode() + b'],"next_cursor":' + _cursor_json(page.next_cursor) + b"}"


# -- search ---------------------------------------------------------------------------------


class AnswerBudget:
    """What one answer may hold: search answers carry metadata (up to 64 KiB an entry), so a small request
    could ask for hundreds of megabytes; past `MAX_ANSWER` bytes the request is refused, never built."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = MAX_ANSWER if limit is None else limit
        self.used = 0

    def take(self, item: dict[str, Any]) -> None:
        self.used += len(json.dumps(item, ensure_ascii=False, separators=(",", ":")))
        if self.used > self.limit:
            raise ValidationError(
                f"the answer would hold more than {self.limit >> 20} MiB; ask for fewer results (top_k) or fewer "
                "queries at once",
                details={"limit_bytes": self.limit},
            )


def _read(engine: Engine, who: str, b: dict[str, Any], budget: AnswerBudget | None = None) -> dict[str, Any]:
    budget = budget or AnswerBudget()
    started = time.perf_counter()
    since, until = _time(b.get("since")), _time(b.get("until"))
    if since is not None and until is not None and until < since:
        raise ValidationError("until is before since")
    hits = engine.search(
        who,
        SearchQuery(
            query=b["query"],
            scope=b.get("domain"),
            order_by="recency" if b["order_by"] == "recency" else "relevance",
            since=since,
            until=until,
            exclude_author=b.get("exclude_author"),
            include_history=bool(b["include_history"]),
            top_k=int(b["top_k"]),
        ),
    )
    floor = float(b.get("min_relevance", 0.0))
    hits = [h for h in hits if h.relevance >= floor]
    extras = engine.atom_extras([h.entry.atom_id for h in hits])
    items = []
    for hit in hits:
        item = dict(hit.entry.data)
        item.update(
            relevance=hit.relevance,
            similarity=hit.relevance,
            valence=0.0,
            importance=0.0,
            source="fts",
            metadata=extras.get(hit.entry.atom_id, ({}, None))[0],
        )
        budget.take(item)
        items.append(item)
    return {
        "items": items,
        "episodic_hit": False,
        "query_concepts": [],
        "expanded_concepts": [],
        "search_time_ms": round((time.perf_counter() - started) * 1000, 3),
    }


def read(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /memory/read`: search one scope (rooms after the membership check)."""
    return _read(engine, who, require("ReadRequestSchema", call.body()))


def _refuse_rooms(domains: list[str | None], endpoint: str) -> None:
    if any(d is not None and d.startswith(ROOM_PREFIX) for d in domains):
        raise ValidationError(f"{endpoint} refuses xroom: domains; search a room with /memory/read")


def read_batch(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /memory/read-batch`: several searches of one's own store (no rooms)."""
    b = require("ReadBatchRequestSchema", call.body())
    queries = [require("ReadRequestSchema", q) for q in b["queries"]]
    _refuse_rooms([q.get("domain") for q in queries], "read-batch")
    budget = AnswerBudget()
    return {"results": [_read(engine, who, q, budget) for q in queries]}


def query(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /memory/query`: one search over several own domains (no rooms)."""
    b = require("QueryRequestSchema", call.body())
    domains: list[str] = list(b.get("domains") or [])
    _refuse_rooms(list(domains), "query")
    base = {
        "query": b["query"],
        "order_by": "relevance",
        "include_history": b["include_history"],
        "min_relevance": b["min_relevance"],
        "top_k": 500 if domains else b["top_k"],
    }
    answer = _read(engine, who, base)
    if domains:
        wanted = set(domains)
        answer["items"] = [i for i in answer["items"] if i["domain"] in wanted][: int(b["top_k"])]
    return answer


# -- writes ---------------------------------------------------------------------------------


def write(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /memory/write`: the principal comes from the key; `author` may name the agent only."""
    b = require("WriteRequestSchema", call.body())
    author: dict[str, Any] = b.get("author") or {}
    result = engine.write(
        who,
        WriteRequest(
            content=b["content"],
            domain=b["domain"],
            concepts=tuple(b.get("concepts") or ()),
            metadata=b.get("metadata"),
            external_ref=b.get("external_ref"),
            supersedes=tuple(b.get("supersedes") or ()),
            agent=author.get("agent"),
            agent_name=author.get("agent_name"),
            client_env=author.get("client_env") or "api",
        ),
    )
    return {
        "stored": True,
        "atom_id": result.atom_id,
        "importance": 0.0,
        "reason": "" if result.created else DUPLICATE_REASON,
        "superseded": list(result.superseded),
    }


# -- rooms ----------------------------------------------------------------------------------


def rooms_list(engine: Engine, who: str, call: Call) -> list[dict[str, Any]]:
    """`GET /memory/rooms`: owned rooms, then joined ones."""
    return [r.wire() for r in engine.list_rooms(who)]


def rooms_create(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /memory/rooms`."""
    b = require("CreateRoomRequestSchema", call.body())
    room = engine.create_room(who, b["name"], b.get("description"))
    return room.created(
        f"Write and read with domain {room.address}. Bring others in with an invite: "
        f"POST /memory/rooms/{room.room_id}/invites (mnemo rooms invite {room.address})."
    )


def rooms_invite(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /memory/rooms/{room_id}/invites` (owner only; an unknown room reads like a foreign one)."""
    b = require("CreateInviteRequestSchema", call.body())
    room_id = call.params["room_id"]
    invite = engine.create_invite(
        who, room_id, scope=b["scope"], expires_days=int(b["expires_in_days"]), max_uses=int(b["max_uses"])
    )
    return invite.wire()


def rooms_join(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /memory/rooms/join`: joining twice is a no-op success."""
    b = require("JoinRoomRequestSchema", call.body())
    joined = engine.join(who, b["code"])
    return joined.wire(f"Read it with domain {joined.address} (mnemo recent --scope {joined.address}).")


# -- vault ----------------------------------------------------------------------------------


def vault_list(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`GET /vault/secrets`: aliases, context, time and concepts; never a value."""
    return {"secrets": [s.wire() for s in engine.vault_list(who)]}


def vault_add(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /vault/secrets`: the sealed value is stored and never returned."""
    b = require("CreateSecretRequest", call.body())
    atom = engine.vault_add(who, b["alias"], b["context"], b["sealed_secret_b64"], tuple(b.get("concepts") or ()))
    return {"atom_id": atom, "alias": b["alias"]}


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
