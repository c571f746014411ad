"""Provides the endpoints of WIRE.md: each a plain function run in a database thread as the key's principal."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

from mnemo_tui import timefmt
from mnemo_tui.engine.interface import Engine
from mnemo_tui.errors import MnemoError, Timeout, Unprocessable, ValidationError
from mnemo_tui.model import ROOM_PREFIX, RecentQuery, SearchQuery, Value, WriteRequest, WriteResult, room_of
from mnemo_tui.server import bodies
from mnemo_tui.server.bodies import M, require_uuid
from mnemo_tui.server.envelope import Raw, dumps

T = TypeVar("T")
DUPLICATE_REASON = "duplicate external_ref: the first atom was returned"
MAX_ANSWER = 16 << 20  # bytes one search answer may hold (read, read-batch, query)
MAX_CONDITIONS = 64  # metadata_filter conditions one read may hold (each is evaluated for every candidate)


class Call(Value):
    """One request as the endpoint functions see it: the raw body, the path parameters, the headers an
    endpoint reads."""

    __slots__ = ("headers", "params", "raw")
    raw: bytes
    params: dict[str, str]
    headers: dict[str, str]

    def __init__(
        self, raw: bytes = b"", params: dict[str, str] | None = None, headers: dict[str, str] | None = None
    ) -> None:
        self.raw = raw
        self.params = {} if params is None else params
        self.headers = {} if headers is None else headers

    def body(self, model: type[M]) -> M:
        """The body read as `model` (`bodies.parse`: 422 when it does not fit, 400 when it is not JSON)."""
        return bodies.parse(model, self.raw)


def _time(value: str | None) -> int | None:
    return None if value is None else timefmt.parse_iso(value)


def _cursor_json(cursor: str | None) -> bytes:
    return b"null" if cursor is None else b'"' + cursor.encode() + b'"'


# -- the feed -------------------------------------------------------------------------------


def recent(engine: Engine, who: str, call: Call) -> bytes:
    """`POST /memory/recent`: one page of the feed, the stored wire items joined as they are."""
    b = call.body(bodies.Recent)
    query = RecentQuery(
        scope=b.domain,
        since=_time(b.since),
        until=_time(b.until),
        exclude_author=b.exclude_author,
        limit=b.limit,
        cursor=b.cursor,
        include_history=b.include_history,
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
        # ASCII-escaped length: never less than the UTF-8 bytes the answer will take.
        self.used += len(json.dumps(item, separators=(",", ":")))
        if self.used > self.limit:
            raise ValidationError(
                f"the answer would hold more than {self.limit >> 20} MiB; ask for fewer results (top_k) or fewer "
                "queries at once",
                details={"limit_bytes": self.limit},
            )


FEEDBACK_WEIGHT = 0.5  # how far feedback moves a match: score = relevance * (1 + 0.5 * valence)
CONCEPT_BOOST = 0.25  # a match carrying one of the request's `concepts`: score * 1.25
_AUTHOR = {"author_principal": "principal", "author_agent": "agent", "author_client_env": "client_env"}


def _matches_metadata(metadata: dict[str, Any], conditions: list[dict[str, Any]]) -> bool:
    """`metadata_filter`: every condition holds (eq: equal; contains: a substring of a text, or an element
    of a list; in: one of the values listed)."""
    for c in conditions:
        if c["key"] not in metadata:
            return False
        have, want, op = metadata[c["key"]], c["value"], c.get("op", "eq")
        if op == "eq" and have != want:
            return False
        if op == "contains" and not (
            (isinstance(have, str) and isinstance(want, str) and want in have)
            or (isinstance(have, list) and want in have)
        ):
            return False
        if op == "in" and not (isinstance(want, list) and have in want):
            return False
    return True


def _near_copy(text: str) -> str:
    return " ".join(text.lower().split())


def _read(engine: Engine, who: str, b: dict[str, Any], budget: AnswerBudget | None = None) -> dict[str, Any]:
    budget = budget or AnswerBudget()
    started = time.perf_counter()
    since, until = _time(b.get("since")), _time(b.get("until"))
    if since is not None and until is not None and until < since:
        raise ValidationError("until is before since")
    diversity = float(b.get("diversity", 0.0))
    top_k = int(b["top_k"])
    hints = [c for c in b.get("concepts") or [] if isinstance(c, str)]
    conditions: list[dict[str, Any]] = list(b.get("metadata_filter") or [])
    if len(conditions) > MAX_CONDITIONS:
        raise Unprocessable(
            f"metadata_filter holds at most {MAX_CONDITIONS} conditions (MAX_CONDITIONS), got {len(conditions)}",
            details={"limit_conditions": MAX_CONDITIONS},
        )
    authors = {field: b[name] for name, field in _AUTHOR.items() if b.get(name) is not None}
    external = b.get("author_is_external")
    recency = b.get("order_by") == "recency" or b.get("strategy") == "temporal"
    filtered = bool(conditions or authors or external is not None or diversity or hints or not recency)
    hits = engine.search(
        who,
        SearchQuery(
            query=b["query"],
            scope=b.get("domain"),
            order_by="recency" if recency else "relevance",
            since=since,
            until=until,
            exclude_author=b.get("exclude_author"),
            include_history=bool(b["include_history"]),
            # Re-ranking and post-filters choose among more candidates than are returned.
            top_k=min(500, top_k * 4) if filtered else top_k,
        ),
    )
    ids = [h.entry.atom_id for h in hits]
    extras = engine.atom_extras(ids)
    valence = engine.valences(ids)
    episodic: list[Any] = []
    fingerprint = b.get("fingerprint")
    if isinstance(fingerprint, str) and fingerprint:
        episodic = engine.by_fingerprint(who, b.get("domain"), fingerprint)
    floor = float(b.get("min_relevance", 0.0))
    scored = []
    for hit in hits:
        data = hit.entry.data
        provenance = data.get("provenance") or {}
        if any(provenance.get(field) != want for field, want in authors.items()):
            continue
        if external is True:  # every author of an embedded store is internal
            continue
        metadata = extras.get(hit.entry.atom_id, ({}, None))[0]
        if conditions:
            engine.check_time()  # the conditions are Python: the deadline that stops SQL does not stop them
            if not _matches_metadata(metadata, conditions):
                continue
        v = valence.get(hit.entry.atom_id, 0.0)
        score = hit.relevance * (1 + FEEDBACK_WEIGHT * v)
        if hints and set(hints) & set(data.get("concepts") or []):
            score *= 1 + CONCEPT_BOOST
        if hit.relevance < floor:
            continue
        scored.append((score, hit, metadata, v))
    if not recency:
        scored.sort(key=lambda s: -s[0])
    items: list[dict[str, Any]] = []
    seen_ids: set[str] = set()
    seen_text: set[str] = set()
    episodic_ids = [e.atom_id for e in episodic]
    episodic_extras = engine.atom_extras(episodic_ids)
    for entry in episodic:
        item = dict(entry.data)
        item.update(
            relevance=1.0,
            similarity=1.0,
            valence=round(engine.valences([entry.atom_id]).get(entry.atom_id, 0.0), 6),
            importance=0.0,
            source="episodic",
            metadata=episodic_extras.get(entry.atom_id, ({}, None))[0],
        )
        budget.take(item)
        items.append(item)
        seen_ids.add(entry.atom_id)
        seen_text.add(_near_copy(entry.content))
    for score, hit, metadata, v in scored:
        if len(items) >= top_k:
            break
        if hit.entry.atom_id in seen_ids:
            continue
        text = _near_copy(hit.entry.content)
        if diversity > 0 and text in seen_text:
            continue
        seen_ids.add(hit.entry.atom_id)
        seen_text.add(text)
        item = dict(hit.entry.data)
        item.update(
            relevance=round(min(1.0, score), 6),
            similarity=hit.relevance,
            valence=round(v, 6),
            importance=0.0,
            source="fts",
            metadata=metadata,
        )
        budget.take(item)
        items.append(item)
    expanded: list[str] = []
    if hints and b.get("include_associations", True):
        try:
            graph = engine.graph(who, hints[:20], depth=1, domain=b.get("domain"), min_weight=0.0, limit=50)
        except Unprocessable:
            pass  # concepts past the graph's cap expand to nothing: the read itself still answers
        else:
            expanded = sorted({n for e in graph.edges for n in (e.source, e.target)} - set(hints))
    return {
        "items": items,
        "episodic_hit": bool(episodic),
        "query_concepts": hints,
        "expanded_concepts": expanded,
        "search_time_ms": round((time.perf_counter() - started) * 1000, 3),
    }


def read(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /memory/read`: search one scope (rooms after the membership check)."""
    return _read(engine, who, call.body(bodies.Read).model_dump())


def _refuse_rooms(domains: list[str | None], endpoint: str) -> None:
    if any(d is not None and d.startswith(ROOM_PREFIX) for d in domains):
        raise ValidationError(f"{endpoint} refuses xroom: domains; search a room with /memory/read")


def read_batch(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /memory/read-batch`: several searches of one's own store (no rooms)."""
    queries = [q.model_dump() for q in call.body(bodies.ReadBatch).queries]
    _refuse_rooms([q.get("domain") for q in queries], "read-batch")
    budget = AnswerBudget()
    return {"results": [_read(engine, who, q, budget) for q in queries]}


def query(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /memory/query`: one search over several own domains (no rooms)."""
    b = call.body(bodies.Query).model_dump()
    domains: list[str] = list(b.get("domains") or [])
    _refuse_rooms(list(domains), "query")
    base = {
        "query": b["query"],
        "order_by": "relevance",
        "include_history": b["include_history"],
        "min_relevance": b["min_relevance"],
        "top_k": 500 if domains else b["top_k"],
        "concepts": b.get("concepts") or [],
        "metadata_filter": b.get("metadata_filter") or [],
        "include_associations": b["include_associations"],
    }
    answer = _read(engine, who, base)
    if domains:
        wanted = set(domains)
        answer["items"] = [i for i in answer["items"] if i["domain"] in wanted][: int(b["top_k"])]
    return answer


# -- writes ---------------------------------------------------------------------------------


def _write_request(b: bodies.Write) -> WriteRequest:
    author = b.author or bodies.Author()
    return WriteRequest(
        content=b.content,
        domain=b.domain,
        concepts=tuple(b.concepts),
        metadata=b.metadata if "metadata" in b.model_fields_set else None,
        external_ref=b.external_ref,
        supersedes=tuple(str(old) for old in b.supersedes or ()),
        agent=author.agent,
        agent_name=author.agent_name,
        client_env=author.client_env or "api",
        fingerprint=b.fingerprint,
    )


def write(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /memory/write`: the principal comes from the key; `author` may name the agent only."""
    result = engine.write(who, _write_request(call.body(bodies.Write)))
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


def _whole_delete(what: str, delete: Callable[[], T], parts: bool = False) -> T:
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
    deleted = _whole_delete("the room", lambda: engine.delete_room(who, room_id))
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


# -- the rest of the memory plane ----------------------------------------------------------

MAX_IDEMPOTENCY_KEY = 240
MAX_EXPORT = 64 << 20  # bytes one export answer may hold
GRAPH_FLOOR = 0.05  # the weight floor of an unfiltered walk of depth >= 2 (as the hosted service applies)


def stats(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`GET /memory/stats`: counts of one's own store; what has no meaning here is an honest zero."""
    s = engine.stats(who)
    return {
        "total_atoms": s.total_atoms,
        "episodes": s.total_atoms,
        "prototypes": 0,
        "singletons": 0,
        "hebbian_edges": s.concept_edges,
        "episodic_fingerprints": s.fingerprints,
        "domains": s.domains,
        "avg_valence": s.avg_valence,
        "avg_importance": 0.0,
        "feedback_atoms": s.feedback,
    }


def feedback(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /memory/feedback`: the outcome is recorded for each of one's own atoms named."""
    started = time.perf_counter()
    b = call.body(bodies.Feedback)
    updated, mean = engine.feedback(who, [str(a) for a in b.atom_ids], b.outcome)
    return {
        "updated_count": updated,
        "avg_valence": mean,
        "coactivation_edges": 0,
        "feedback_time_ms": round((time.perf_counter() - started) * 1000, 3),
    }


def _idempotency_key(call: Call) -> str | None:
    key = call.headers.get("idempotency-key")
    if key is None or not key.strip():
        return None
    if len(key) > MAX_IDEMPOTENCY_KEY:
        raise ValidationError(f"Idempotency-Key is over {MAX_IDEMPOTENCY_KEY} characters")
    return "write-batch:" + key.strip()


def write_batch(engine: Engine, who: str, call: Call) -> bytes:
    """`POST /memory/write-batch` (and `/memory/write_batch`): up to 500 writes, one answer each; the same
    `Idempotency-Key` within 24 hours gets the first answer back, with nothing written again."""
    key = _idempotency_key(call)
    if key is not None:
        before = engine.remembered(who, key)
        if before is not None:
            return before.encode()
    items = call.body(bodies.WriteBatch).items
    reqs = [_write_request(item) for item in items]
    if key is None:
        return _batch_answer(engine.write_batch(who, reqs))
    # Claimed with the write: a concurrent request with the key waits for this one and returns its answer.
    return engine.write_batch_once(who, key, reqs, lambda results: _batch_answer(results).decode()).encode()


def _batch_answer(results: list[WriteResult | MnemoError]) -> bytes:
    answers: list[dict[str, Any]] = []
    for index, result in enumerate(results):
        if isinstance(result, MnemoError):
            answers.append(
                {
                    "index": index,
                    "stored": False,
                    "atom_id": None,
                    "importance": 0.0,
                    "reason": "",
                    "error": result.message,
                }
            )
        else:
            answers.append(
                {
                    "index": index,
                    "stored": True,
                    "atom_id": result.atom_id,
                    "importance": 0.0,
                    "reason": "" if result.created else DUPLICATE_REASON,
                    "error": None,
                }
            )
    return dumps(
        {"total_count": len(answers), "stored_count": sum(1 for a in answers if a["stored"]), "results": answers}
    )


def atom_chain(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`GET /memory/atoms/{atom_id}/chain`: every revision reachable by supersession, oldest first."""
    atom = require_uuid(call.params["atom_id"], "atom_id")
    chain = engine.chain(who, atom)
    revisions = []
    for rev in chain.revisions:
        data = rev.entry.data
        item: dict[str, Any] = {
            "id": rev.entry.atom_id,
            "content": data["content"],
            "domain": data["domain"],
            "concepts": list(data.get("concepts") or []),
            "created_at": data["created_at"],
            "is_head": rev.is_head and rev.entry.atom_id not in chain.dangling,
        }
        if data.get("supersedes"):
            item["supersedes"] = data["supersedes"]
        if data.get("superseded_by"):
            item["superseded_by"] = data["superseded_by"]
        revisions.append(item)
    return {"atom_id": chain.atom_id, "revisions": revisions, "dangling": chain.dangling, "truncated": chain.truncated}


def atom_by_external_ref(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /memory/atoms/by-external-ref`: the atom of one's own store written with that ref (404 otherwise)."""
    atom = engine.by_external_ref(who, call.body(bodies.ExternalRef).external_ref)
    return atom_get(engine, who, Call(params={"atom_id": atom}))


def rooms_invites(engine: Engine, who: str, call: Call) -> list[dict[str, Any]]:
    """`GET /memory/rooms/{room_id}/invites`: owner only; audit fields, never a code."""
    return [i.wire() for i in engine.list_invites(who, call.params["room_id"])]


def export(engine: Engine, who: str, call: Call) -> Raw:
    """`GET /memory/export`: one's own store as JSON lines, oldest first, history included; never the vault."""
    out: list[bytes] = []
    size = 0
    for lines in engine.export(who):
        for line in lines:
            data = line.encode() + b"\n"
            size += len(data)
            if size > MAX_EXPORT:
                raise ValidationError(
                    f"the export would hold more than {MAX_EXPORT >> 20} MiB; export domain by domain with "
                    "POST /memory/recent instead",
                    details={"limit_bytes": MAX_EXPORT},
                )
            out.append(data)
    return Raw(b"".join(out), "application/x-ndjson")


def domain_delete(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`DELETE /memory/domain/{domain}`: every entry of one own domain; the vault is never touched."""
    domain = call.params["domain"]
    if room_of(domain) is not None:
        raise ValidationError("a room is not wiped by domain; delete its entries one by one")
    wipe = _whole_delete("the domain", lambda: engine.delete_domain(who, domain), parts=True)
    return {
        "deleted": wipe.deleted,
        "domain": domain,
        "skipped_secrets": wipe.skipped_secrets,
        "superseded_predecessors_left_hidden_count": wipe.left_hidden,
    }


def reset(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`DELETE /memory/reset`: every entry of one's own store (only when the server allows it; app.py)."""
    return {
        "deleted": _whole_delete("your store's entries", lambda: engine.reset(who), parts=True),
        "status": "cleared",
    }


def consolidate(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /memory/consolidate`: the embedded engine never merges or compresses entries (every entry is
    kept as written, which the feed's completeness rests on); the answer reports the domain unchanged."""
    started = time.perf_counter()
    domain = call.body(bodies.Consolidate).domain
    if domain is not None and room_of(domain) is not None:
        raise ValidationError("a room is not consolidated; name one of your own domains")
    count = engine.count_atoms(who, domain)
    return {
        "domain": domain if domain is not None else "",
        "atoms_before": count,
        "atoms_after": count,
        "prototypes_created": 0,
        "singletons_protected": 0,
        "compression_ratio": 1.0,
        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
    }


def graph(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /memory/graph`: the concepts around the seeds, joined by the live atoms that carry both."""
    b = call.body(bodies.Graph)
    depth = b.depth
    floor = b.min_weight if b.min_weight is not None else (GRAPH_FLOOR if depth >= 2 else 0.0)
    g = engine.graph(who, list(b.seeds), depth=depth, domain=b.domain, min_weight=floor, limit=b.limit)
    degree: dict[str, int] = {}
    for e in g.edges:
        degree[e.source] = degree.get(e.source, 0) + 1
        degree[e.target] = degree.get(e.target, 0) + 1
    return {
        "nodes": [{"concept": c, "degree": d} for c, d in sorted(degree.items())],
        "edges": [
            {
                "source": e.source,
                "target": e.target,
                "weight": e.weight,
                "valence": e.valence,
                "count": e.count,
                "updated_at": timefmt.to_iso(e.updated_at),
            }
            for e in g.edges
        ],
        "truncated": g.truncated,
        "min_weight_applied": g.min_weight_applied,
    }
