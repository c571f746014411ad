"""Provides the rest of docs/server.md's memory plane: stats, feedback, batches, chains, invites listed, export,
domain wipes, reset, consolidate and the concept graph; each a plain function like those of `routes`."""

from __future__ import annotations

import time
from typing import Any

from mnemo_tui import timefmt
from mnemo_tui.engine.interface import Engine
from mnemo_tui.errors import MnemoError, ValidationError
from mnemo_tui.limits import room_of
from mnemo_tui.server import bodies
from mnemo_tui.server.bodies import require_uuid
from mnemo_tui.server.envelope import Raw, dumps
from mnemo_tui.server.routes import DUPLICATE_REASON, Call, atom_get, whole_delete, write_request
from mnemo_tui.values.writes import WriteResult

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
    reqs = [write_request(item) for item in items]
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
    wipe = whole_delete("the domain", lambda: engine.delete_domain(who, domain), parts=True)
    return {
        "deleted": wipe.deleted,
        "domain": domain,
        "skipped_secrets": wipe.skipped_secrets,
        "superseded_predecessors_left_hidden_count": wipe.left_hidden,
    }


def reset(engine: Engine, who: str, call: Call) -> dict[str, Any]:
    """`DELETE /memory/reset`: every entry of one's own store (only when the server allows it; app.py)."""
    return {
        "deleted": whole_delete("your store's entries", lambda: engine.reset(who), parts=True),
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
