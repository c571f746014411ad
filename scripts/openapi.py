"""Builds `mnemo_tui/server/openapi.json` from what the server runs (issue 56; docs/server.md, "The published schema").

What the server decides is generated: the paths and methods are the app's routes (`create_app`), an operation
needs a key unless its path is in `app.PUBLIC`, and its statuses are those the layers it passes through can
answer (`EVERY`, `KEYED`, `IN_A_THREAD`, `WITH_A_BODY`) plus its own refusals (`OWN`). The component schemas
the hosted service has are copied from its description (`tests/reference/hosted-openapi.json`), verbatim;
mnemo's own stay as they are. The
prose of each operation (summary, description, parameters, request body, the 2xx content) is written by hand
in the document and kept; an operation new to it starts from `NEW`.

    .venv/bin/python scripts/openapi.py            # rewrite the document
    .venv/bin/python scripts/openapi.py --check    # exit 1 when it is not what this would write

`tests/server/test_openapi.py` runs the check, walks the routes, and a recorder over the server tests
(`tests/server/conftest.py`) fails any test whose answers carry a status its operation does not declare.
"""

from __future__ import annotations

import copy
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCUMENT = ROOT / "mnemo_tui" / "server" / "openapi.json"
HOSTED = ROOT / "tests" / "reference" / "hosted-openapi.json"
SECURITY = [{"ApiKey": []}, {"Bearer": []}]
ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponseSchema"}}}

# What the layers every request passes through can answer (`server/middleware.py`, `endpoints.py`, `pool.py`).
EVERY = {500: "Internal server error: the envelope, never a bare page"}
IN_A_THREAD = {503: "Unavailable: the store busy past its limit, past the request's deadline, or unreachable"}
KEYED = {
    401: "The key is missing, malformed, unknown or revoked (`details.reason`)",
    429: "`RATE_LIMITED`: past the key's request rate (or, without a valid key, its address's); retryable, `Retry-After`",
}
WITH_A_BODY = {
    400: 'The body is not JSON, or holds what its schema cannot say (docs/server.md, "400 or 422")',
    408: "The body did not arrive within its deadline (10 s)",
    413: "The body is over 1 MiB",
    422: "The body does not fit its schema, or is missing: the flat envelope, `details.errors`",
    503: "Unavailable: too many bodies in flight, the store busy, past the deadline, or unreachable",
}
FORBIDDEN = "A room one is not in (an unknown room reads the same)"
UUID_PATH = "The path's id is not a UUID"
CONSUMER_NAME = "A consumer's name blank, over 200 characters or holding a control character"

# Each operation's own refusals, beyond the layers' (the route functions and the engine under them).
OWN: dict[tuple[str, str], dict[int, str]] = {
    ("POST", "/memory/recent"): {
        403: FORBIDDEN,
        429: "With `Accept: application/x-ndjson`, `TOO_MANY_WALKS`: 16 streamed walks open with this key already, "
        "retryable (`Retry-After`)",
    },
    ("POST", "/memory/write"): {403: FORBIDDEN, 404: "An id of `supersedes` names no entry of one's own store"},
    ("POST", "/memory/follow"): {
        403: FORBIDDEN,
        422: "The body does not fit (or is missing), `cursor` or `until` given, or a `Last-Event-ID` this server "
        "did not send",
        429: "`TOO_MANY_FOLLOWS`: 100 follows open with this key, retryable (`Retry-After`)",
        503: "The server's follows are all taken (`--max-follows`), retryable (`Retry-After`); or the store is "
        "unavailable",
    },
    ("POST", "/memory/read"): {403: FORBIDDEN},
    ("POST", "/memory/read-batch"): {403: FORBIDDEN},
    ("POST", "/memory/query"): {403: FORBIDDEN},
    ("GET", "/memory/rooms"): {},
    ("POST", "/memory/rooms"): {409: "A room of that name exists for this account"},
    ("POST", "/memory/rooms/join"): {
        403: "The invite's room is gone",
        404: "No such invite code",
        409: "The invite expired or was used up",
    },
    ("GET", "/memory/rooms/{room_id}/invites"): {403: "A room one does not own (an unknown room reads the same)"},
    ("POST", "/memory/rooms/{room_id}/invites"): {403: "A room one does not own (an unknown room reads the same)"},
    ("DELETE", "/memory/rooms/{room_id}"): {403: "A room one does not own (an unknown room reads the same)"},
    ("GET", "/vault/secrets"): {},
    ("POST", "/vault/secrets"): {409: "A secret of that alias exists"},
    ("GET", "/vault/secrets/by-alias/{alias}"): {404: "No secret of that alias (another principal's included)"},
    ("POST", "/memory/atoms/by-external-ref"): {404: "No own entry with that external_ref"},
    ("GET", "/memory/atoms/{atom_id}"): {404: "No such entry readable to the key", 422: UUID_PATH},
    ("DELETE", "/memory/atoms/{atom_id}"): {403: "A room entry one may read but not delete", 422: UUID_PATH},
    ("GET", "/memory/atoms/{atom_id}/chain"): {404: "No such entry readable to the key", 422: UUID_PATH},
    ("GET", "/memory/domains"): {},
    ("GET", "/memory/stats"): {},
    ("POST", "/memory/feedback"): {},
    ("POST", "/memory/write-batch"): {
        400: "The body does not fit, or an `Idempotency-Key` over 240 characters",
        403: FORBIDDEN,
    },
    ("POST", "/memory/write_batch"): {
        400: "The body does not fit, or an `Idempotency-Key` over 240 characters",
        403: FORBIDDEN,
    },
    ("POST", "/memory/graph"): {403: FORBIDDEN},
    ("POST", "/memory/consolidate"): {},
    ("GET", "/memory/export"): {400: "The answer would hold more than 64 MiB"},
    ("POST", "/memory/removals"): {
        403: "A room one is not, and never was, a member of",
        410: "`REMOVALS_GONE`: removals newer than `after` were dropped (past the retention): re-read the scope",
    },
    ("DELETE", "/memory/domain/{domain}"): {400: "A room address, or a domain no store can hold"},
    ("DELETE", "/memory/reset"): {403: "`RESET_NOT_ALLOWED`: the server was not started with `--allow-reset`"},
    ("GET", "/health"): {503: "The store does not answer"},
    ("GET", "/ready"): {503: "The store does not answer"},
    ("GET", "/health/ready"): {503: "The store does not answer (the same body, `ready` false)"},
    ("GET", "/mnemo/whoami"): {},
    ("GET", "/mnemo/consumers"): {},
    ("GET", "/mnemo/consumers/{consumer}"): {
        400: CONSUMER_NAME,
        404: "The consumer has no position on any scope (`details.reason`: `unknown_consumer`)",
    },
    ("POST", "/mnemo/consumers/{consumer}"): {
        400: CONSUMER_NAME + ", a bad scope, `position: null` without `unconditional`, or a body its schema cannot say",
        409: "`CONSUMER_MOVED`: the stored position is not `expected` (another pass committed first); "
        "`details.position` is the stored one",
    },
    ("DELETE", "/mnemo/consumers/{consumer}"): {400: CONSUMER_NAME},
    ("GET", "/openapi.json"): {},
    ("GET", "/livez"): {},
    ("GET", "/readyz"): {503: "Not ready: the server is stopping, or its database did not answer within 2 s"},
    ("GET", "/metrics"): {},
}


def _probe(name: str, meaning: str) -> dict[str, Any]:
    """The prose of a Kubernetes-style probe at the origin (docs/server.md, "Operating it")."""
    return {
        "tags": ["mnemo"],
        "summary": f"{name} probe (mnemo serve's extension)",
        "description": f"**mnemo serve's extension:** {meaning} No key. `?verbose` lists each check, one a line. "
        'See mnemo\'s docs/server.md, "Operating it".',
        "operationId": f"{name.lower()}_get",
        "parameters": [
            {"name": "verbose", "in": "query", "required": False, "schema": {"type": "string"}, "allowEmptyValue": True}
        ],
        "responses": {
            "200": {"description": "`ok`, or each check", "content": {"text/plain": {"schema": {"type": "string"}}}}
        },
    }


_POSITION = {
    "type": "object",
    "required": ["consumer", "scope", "created_at", "boundary_ids", "updated_at", "host"],
    "properties": {
        "consumer": {"type": "string"},
        "scope": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "created_at": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}]},
        "boundary_ids": {"type": "array", "items": {"type": "string"}},
        "updated_at": {"type": "string", "format": "date-time"},
        "host": {"type": "string"},
    },
}
_LAGGED = copy.deepcopy(_POSITION)
_LAGGED["required"] += ["behind_entries", "behind_seconds"]
_LAGGED["properties"] |= {
    "behind_entries": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
    "behind_seconds": {"anyOf": [{"type": "number", "minimum": 0}, {"type": "null"}]},
}
_CONSUMER_PATH = [
    {
        "name": "consumer",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "minLength": 1, "maxLength": 200, "title": "Consumer"},
    }
]
_SEE = "See mnemo's docs/consumers.md."


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"200": {"description": description, "content": {"application/json": {"schema": schema}}}}


# The durable consumers (server/consumers.py): the hosted service has none (it answers 404).
CONSUMERS: dict[tuple[str, str], dict[str, Any]] = {
    ("GET", "/mnemo/consumers"): {
        "tags": ["mnemo"],
        "summary": "List consumers (mnemo serve's extension)",
        "description": "**mnemo serve's extension (the hosted service answers 404):** every position of the key's "
        "principal's consumers, one per consumer and scope, each with how far it is behind its scope "
        "(`behind_entries`, `behind_seconds`; null for a room the principal left). " + _SEE,
        "operationId": "consumers_list_api_v1_mnemo_consumers_get",
        "responses": _json(
            "The positions",
            {
                "type": "object",
                "required": ["consumers"],
                "properties": {"consumers": {"type": "array", "items": _LAGGED}},
            },
        ),
    },
    ("GET", "/mnemo/consumers/{consumer}"): {
        "tags": ["mnemo"],
        "summary": "Show a consumer (mnemo serve's extension)",
        "description": "**mnemo serve's extension:** one consumer's positions, one per scope; 404 with "
        "`details.reason` `unknown_consumer` when it has none (the hosted service's 404 for the unknown path has "
        "no such reason). " + _SEE,
        "operationId": "consumer_show_api_v1_mnemo_consumers__consumer__get",
        "parameters": _CONSUMER_PATH,
        "responses": _json(
            "The consumer's positions",
            {
                "type": "object",
                "required": ["consumer", "positions"],
                "properties": {"consumer": {"type": "string"}, "positions": {"type": "array", "items": _POSITION}},
            },
        ),
    },
    ("POST", "/mnemo/consumers/{consumer}"): {
        "tags": ["mnemo"],
        "summary": "Commit a consumer's position (mnemo serve's extension)",
        "description": "**mnemo serve's extension:** moves the consumer's position on `scope` (null: the own store) "
        "to `position` if the stored one is `expected` (null or absent: it has none), as one compare-and-set; "
        "otherwise 409 `CONSUMER_MOVED`. `unconditional` writes whatever is stored (`mnemo watermark set`); "
        "with it, `position: null` forgets the scope's position (`mnemo watermark reset`). "
        "`host` names the machine that moved it. " + _SEE,
        "operationId": "consumer_commit_api_v1_mnemo_consumers__consumer__post",
        "parameters": _CONSUMER_PATH,
        "requestBody": {
            "required": True,
            "content": {
                # the body and its mark are components (`ConsumerCommitRequestSchema`, `ConsumerMarkSchema`),
                # mnemo's own, kept in the document as they are: tests/server/test_bodies.py holds each to its model
                "application/json": {"schema": {"$ref": "#/components/schemas/ConsumerCommitRequestSchema"}}
            },
        },
        "responses": _json(
            "Moved: the position stored now",
            {
                "type": "object",
                "required": ["position"],
                "properties": {"position": {"anyOf": [_POSITION, {"type": "null"}]}},
            },
        ),
    },
    ("DELETE", "/mnemo/consumers/{consumer}"): {
        "tags": ["mnemo"],
        "summary": "Delete a consumer's positions (mnemo serve's extension)",
        "description": "**mnemo serve's extension:** forgets the consumer's position on every scope; its next "
        "pass starts by its start policy. " + _SEE,
        "operationId": "consumer_delete_api_v1_mnemo_consumers__consumer__delete",
        "parameters": _CONSUMER_PATH,
        "responses": _json(
            "How many positions were forgotten",
            {"type": "object", "required": ["deleted"], "properties": {"deleted": {"type": "integer", "minimum": 0}}},
        ),
    },
}


# The prose of an operation the document does not have yet.
NEW: dict[tuple[str, str], dict[str, Any]] = {
    ("DELETE", "/memory/rooms/{room_id}"): {
        "tags": ["memory"],
        "summary": "Delete a room (mnemo serve's extension)",
        "description": "**mnemo serve's extension (the hosted plane has no way to delete a room):** owner only; a "
        "member, a stranger and an unknown room all get the same 403. The room's entries go with their feedback, "
        "its invites (pending codes stop working) and its members, in one transaction (rolled back whole past the "
        "request's deadline: 503). See mnemo's docs/server.md, \"The rest of the memory plane\".",
        "operationId": "delete_room_api_v1_memory_rooms__room_id__delete",
        "parameters": [
            {"name": "room_id", "in": "path", "required": True, "schema": {"type": "string", "title": "Room Id"}}
        ],
        "responses": {
            "200": {
                "description": 'Deleted: `{room_id, deleted, status: "deleted"}`',
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "required": ["room_id", "deleted", "status"],
                            "properties": {
                                "room_id": {"type": "string"},
                                "deleted": {"type": "integer", "minimum": 0},
                                "status": {"type": "string", "enum": ["deleted"]},
                            },
                        }
                    }
                },
            }
        },
    },
    ("GET", "/mnemo/whoami"): {
        "tags": ["mnemo"],
        "summary": "Who am I (mnemo serve's extension)",
        "description": "**mnemo serve's extension (the hosted service does not offer it; it answers 404):** the "
        "principal the key sent maps to, and that key's id as `mnemo keys list` shows it. A client names the "
        "principal with it (`mnemo status`); its watermarks stay keyed by the key's fingerprint. See mnemo's "
        "docs/server.md.",
        "operationId": "whoami_api_v1_mnemo_whoami_get",
        "responses": {
            "200": {
                "description": "Successful Response",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/WhoamiResponseSchema"}}},
            }
        },
    },
    **CONSUMERS,
    ("GET", "/livez"): _probe("Livez", "200 while the server's event loop answers, draining or not."),
    ("GET", "/readyz"): _probe(
        "Readyz", "200 when the server takes requests; 503 at once on SIGTERM and while its database does not answer."
    ),
    ("GET", "/metrics"): {
        "tags": ["mnemo"],
        "summary": "Prometheus metrics (mnemo serve's extension)",
        "description": "**mnemo serve's extension:** this server's metrics in Prometheus's text format (requests, "
        "durations, bytes, open streams, refusals, database threads). Any active key; without one only from a "
        "loopback client of a server started with `--metrics-on-loopback`. No label names a principal, key, room, "
        'domain or content. See mnemo\'s docs/server.md, "Operating it".',
        "operationId": "metrics_get",
        "responses": {"200": {"description": "The metrics", "content": {"text/plain": {"schema": {"type": "string"}}}}},
    },
    ("GET", "/openapi.json"): {
        "tags": ["meta"],
        "summary": "This document",
        "description": "The OpenAPI description of this server (no key needed).",
        "operationId": "openapi_json_get",
        "responses": {"200": {"description": "This document", "content": {"application/json": {"schema": {}}}}},
    },
}


def routes() -> list[tuple[str, str]]:
    """Every (method, path) the app serves, in its route table's order (`HEAD` answers as `GET` does)."""
    from starlette.routing import Route

    from mnemo_tui.server.app import create_app
    from mnemo_tui.server.endpoints import Methods

    with tempfile.TemporaryDirectory() as where:
        app = create_app(Path(where) / "store.db")
        try:
            found = []
            for route in app.routes:
                if not isinstance(route, Route) or not isinstance(route.endpoint, Methods):
                    continue  # a mounted app (MCP over HTTP at /mcp) is described by its own documents
                found += [(method, route.path.replace(":segment}", "}")) for method in route.endpoint.handlers]
            return found
        finally:
            app.close()


def public() -> frozenset[str]:
    from mnemo_tui.server.app import PUBLIC

    return PUBLIC


def statuses(method: str, path: str) -> dict[int, str]:
    """What one operation can answer but its success, with why: the layers' statuses, then its own."""
    from mnemo_tui.server.app import PREFIX

    found = dict(EVERY)
    if path not in public():
        found |= KEYED
    if path not in ("/openapi.json", "/livez"):
        found |= IN_A_THREAD
    if method == "POST":
        found |= WITH_A_BODY
    own = OWN.get((method, path.removeprefix(PREFIX)))
    if own is None:  # a route added without saying what it refuses: the document cannot tell the truth of it
        raise SystemExit(f"{method} {path} is served but not described: add it to OWN (and NEW) of scripts/openapi.py")
    return dict(sorted((found | own).items()))


def referenced(value: Any) -> set[str]:
    """The component schemas `value` refers to."""
    if isinstance(value, dict):
        names = {value["$ref"].rsplit("/", 1)[-1]} if isinstance(value.get("$ref"), str) else set()
        for item in value.values():
            names |= referenced(item)
        return names
    if isinstance(value, list):
        return set().union(*(referenced(v) for v in value)) if value else set()
    return set()


def build(current: dict[str, Any], hosted: dict[str, Any]) -> dict[str, Any]:
    """The document: `current`'s prose, everything else from the routes, the rules and the hosted schemas."""
    from mnemo_tui.server.app import PREFIX

    doc = {key: copy.deepcopy(value) for key, value in current.items() if key not in ("paths", "components")}
    paths: dict[str, dict[str, Any]] = {}
    for method, path in routes():
        if method == "HEAD":
            continue  # written beside its GET below
        wire = path.removeprefix(PREFIX)
        old = current["paths"].get(path, {}).get(method.lower()) or copy.deepcopy(NEW.get((method, wire)))
        if not old:
            raise SystemExit(f"{method} {path} has no prose yet: add it to NEW of scripts/openapi.py")
        operation = {key: value for key, value in old.items() if key not in ("responses", "security")}
        success = {code: answer for code, answer in old["responses"].items() if code.startswith("2")}
        refusals = {str(code): {"description": why, "content": ERROR} for code, why in statuses(method, path).items()}
        operation["responses"] = success | refusals
        if path not in public():
            operation["security"] = SECURITY
        paths.setdefault(path, {})[method.lower()] = operation
        if method == "GET":
            head = {key: value for key, value in operation.items() if key != "responses"}
            head["operationId"] = operation["operationId"] + "_head"
            head["summary"] = operation.get("summary", "") + " (headers only)"
            head["responses"] = {
                code: {"description": answer["description"]} for code, answer in operation["responses"].items()
            }
            paths[path]["head"] = head
    doc["paths"] = paths
    schemas = dict(current["components"]["schemas"])
    theirs = hosted["components"]["schemas"]
    wanted, seen = referenced(paths) | set(schemas), set()
    while wanted - seen:
        name = sorted(wanted - seen)[0]
        seen.add(name)
        if name in theirs:
            schemas[name] = copy.deepcopy(theirs[name])
        wanted |= referenced(schemas.get(name, {}))
    components = {key: copy.deepcopy(value) for key, value in current["components"].items() if key != "schemas"}
    doc["components"] = {"schemas": dict(sorted(schemas.items())), **components}
    return doc


def text(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1) + "\n"


def main(argv: list[str]) -> int:
    current = json.loads(DOCUMENT.read_text(encoding="utf-8"))
    made = text(build(current, json.loads(HOSTED.read_text(encoding="utf-8"))))
    if "--check" in argv:
        if made != DOCUMENT.read_text(encoding="utf-8"):
            print(f"{DOCUMENT.relative_to(ROOT)} is not what the routes make: run scripts/openapi.py", file=sys.stderr)
            return 1
        return 0
    DOCUMENT.write_text(made, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main(sys.argv[1:]))
