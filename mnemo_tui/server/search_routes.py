"""Provides the search endpoints of docs/server.md (`read`, `read-batch`, `query`): one search read from the body,
its candidates filtered and ranked, and the answer bounded while it is built."""

from __future__ import annotations

import json
import time
from typing import Any

from mnemo_tui.engine.interface import Engine
from mnemo_tui.errors import Unprocessable, ValidationError
from mnemo_tui.limits import ROOM_PREFIX
from mnemo_tui.server import bodies
from mnemo_tui.server.routes import Call, parse_time
from mnemo_tui.values.model import Entry, Value
from mnemo_tui.values.search import SearchHit, SearchQuery

MAX_ANSWER = 16 << 20  # bytes one search answer may hold (read, read-batch, query)
MAX_CONDITIONS = 64  # metadata_filter conditions one read may hold (each is evaluated for every candidate)
FEEDBACK_WEIGHT = 0.5  # how far feedback moves a match: score = relevance * (1 + 0.5 * valence)
CONCEPT_BOOST = 0.25  # a match carrying one of the request's `concepts`: score * 1.25
_AUTHOR = {"author_principal": "principal", "author_agent": "agent", "author_client_env": "client_env"}


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


class ReadAsk(Value):
    """One search of the wire, read and checked once: what to look for, and how to filter and rank it."""

    query: str
    domain: str | None
    since: int | None
    until: int | None
    top_k: int
    diversity: float
    floor: float
    hints: list[str]
    conditions: list[dict[str, Any]]
    authors: dict[str, Any]
    external: bool | None
    recency: bool
    body: dict[str, Any]

    @classmethod
    def of(cls, b: dict[str, Any]) -> ReadAsk:
        since, until = parse_time(b.get("since")), parse_time(b.get("until"))
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
        return cls(
            query=b["query"],
            domain=b.get("domain"),
            since=since,
            until=until,
            top_k=top_k,
            diversity=diversity,
            floor=float(b.get("min_relevance", 0.0)),
            hints=hints,
            conditions=conditions,
            authors={field: b[name] for name, field in _AUTHOR.items() if b.get(name) is not None},
            external=b.get("author_is_external"),
            recency=b.get("order_by") == "recency" or b.get("strategy") == "temporal",
            body=b,
        )

    @property
    def filtered(self) -> bool:
        """Whether matches are re-ranked or dropped after the search (then more candidates are asked for)."""
        return bool(
            self.conditions
            or self.authors
            or self.external is not None
            or self.diversity
            or self.hints
            or not self.recency
        )


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


Scored = tuple[float, SearchHit, dict[str, Any], float]


def _candidates(engine: Engine, who: str, ask: ReadAsk) -> list[SearchHit]:
    return engine.search(
        who,
        SearchQuery(
            query=ask.query,
            scope=ask.domain,
            order_by="recency" if ask.recency else "relevance",
            since=ask.since,
            until=ask.until,
            exclude_author=ask.body.get("exclude_author"),
            include_history=bool(ask.body["include_history"]),
            # Re-ranking and post-filters choose among more candidates than are returned.
            top_k=min(500, ask.top_k * 4) if ask.filtered else ask.top_k,
        ),
    )


def _scored(engine: Engine, ask: ReadAsk, hits: list[SearchHit]) -> list[Scored]:
    """The hits that pass the filters, each with its score (feedback and concepts weighed), best first."""
    ids = [h.entry.atom_id for h in hits]
    extras = engine.atom_extras(ids)
    valence = engine.valences(ids)
    scored: list[Scored] = []
    for hit in hits:
        data = hit.entry.data
        provenance = data.get("provenance") or {}
        if any(provenance.get(field) != want for field, want in ask.authors.items()):
            continue
        if ask.external is True:  # every author of an embedded store is internal
            continue
        metadata = extras.get(hit.entry.atom_id, ({}, None))[0]
        if ask.conditions:
            engine.check_time()  # the conditions are Python: the deadline that stops SQL does not stop them
            if not _matches_metadata(metadata, ask.conditions):
                continue
        v = valence.get(hit.entry.atom_id, 0.0)
        score = hit.relevance * (1 + FEEDBACK_WEIGHT * v)
        if ask.hints and set(ask.hints) & set(data.get("concepts") or []):
            score *= 1 + CONCEPT_BOOST
        if hit.relevance < ask.floor:
            continue
        scored.append((score, hit, metadata, v))
    if not ask.recency:
        scored.sort(key=lambda s: -s[0])
    return scored


def _episodic(engine: Engine, who: str, ask: ReadAsk) -> list[Entry]:
    fingerprint = ask.body.get("fingerprint")
    if isinstance(fingerprint, str) and fingerprint:
        return engine.by_fingerprint(who, ask.domain, fingerprint)
    return []


def _items(
    engine: Engine, ask: ReadAsk, episodic: list[Entry], scored: list[Scored], budget: AnswerBudget
) -> list[dict[str, Any]]:
    """The answer's items: the exact (episodic) matches first, then the ranked ones up to `top_k`, without
    repeats (nor near copies when `diversity` is asked)."""
    items: list[dict[str, Any]] = []
    seen_ids: set[str] = set()
    seen_text: set[str] = set()
    episodic_extras = engine.atom_extras([e.atom_id for e in episodic])
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
        if len(items) >= ask.top_k:
            break
        if hit.entry.atom_id in seen_ids:
            continue
        text = _near_copy(hit.entry.content)
        if ask.diversity > 0 and text in seen_text:
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
    return items


def _expanded(engine: Engine, who: str, ask: ReadAsk) -> list[str]:
    """The concepts the request's `concepts` lead to in the graph (one hop), the request's own left out."""
    if not ask.hints or not ask.body.get("include_associations", True):
        return []
    try:
        graph = engine.graph(who, ask.hints[:20], depth=1, domain=ask.domain, min_weight=0.0, limit=50)
    except Unprocessable:
        return []  # concepts past the graph's cap expand to nothing: the read itself still answers
    return sorted({n for e in graph.edges for n in (e.source, e.target)} - set(ask.hints))


def search(engine: Engine, who: str, b: dict[str, Any], budget: AnswerBudget | None = None) -> dict[str, Any]:
    """One search of the wire (a `read` body as a dict), answered as docs/server.md's read answer."""
    budget = budget or AnswerBudget()
    started = time.perf_counter()
    ask = ReadAsk.of(b)
    scored = _scored(engine, ask, _candidates(engine, who, ask))
    episodic = _episodic(engine, who, ask)
    return {
        "items": _items(engine, ask, episodic, scored, budget),
        "episodic_hit": bool(episodic),
        "query_concepts": ask.hints,
        "expanded_concepts": _expanded(engine, who, ask),
        "search_time_ms": round((time.perf_counter() - started) * 1000, 3),
    }


def read(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /memory/read`: search one scope (rooms after the membership check)."""
    return search(engine, who, call.body(bodies.Read).model_dump())


def _refuse_rooms(domains: list[str | None], endpoint: str) -> None:
    if any(d is not None and d.startswith(ROOM_PREFIX) for d in domains):
        raise ValidationError(f"{endpoint} refuses xroom: domains; search a room with /memory/read")


def read_batch(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`POST /memory/read-batch`: several searches of one's own store (no rooms)."""
    queries = [q.model_dump() for q in call.body(bodies.ReadBatch).queries]
    _refuse_rooms([q.get("domain") for q in queries], "read-batch")
    budget = AnswerBudget()
    return {"results": [search(engine, who, q, budget) for q in queries]}


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
    answer = search(engine, who, base)
    if domains:
        wanted = set(domains)
        answer["items"] = [i for i in answer["items"] if i["domain"] in wanted][: int(b["top_k"])]
    return answer
