"""Provides the tools' output schemas: the shape of each tool's `structuredContent` (`answers.Reply.data`).

The data is the answer a machine reads: the stored values exact (never sanitized, never cut), holding what the
text shows (a page, the matches, the rooms and domains that fit the text's budget) and counting the rest, so the
two never disagree. An error result (`isError`) carries text only, as the spec allows.
"""

from __future__ import annotations

from typing import Any

_TEXT = {"type": "string"}
_COUNT = {"type": "integer", "minimum": 0}
_SCOPE = {"type": ["string", "null"], "description": "the domain asked for; null: the caller's own domains"}
# A feed entry as the hosted dialect's wire item (`POST /memory/recent`'s `items`), every field as stored.
_ITEM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "atom_id": _TEXT,
        "content": _TEXT,
        "domain": _TEXT,
        "concepts": {"type": "array", "items": _TEXT},
        "created_at": _TEXT,
    },
    "required": ["atom_id", "content"],
}
_ROOM_REF = {"type": "object", "properties": {"name": _TEXT, "address": _TEXT}, "required": ["name", "address"]}
_UNSEARCHED = {
    "type": ["array", "null"],
    "items": _ROOM_REF,
    "description": "an unscoped empty answer: the rooms it did not search (pass one's address as domain); else null",
}


def _shape(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": sorted(properties)}


OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    "memory_write": _shape({"stored": {"type": "boolean"}, "memory_id": _TEXT}),
    "memory_read": _shape(
        {
            "scope": _SCOPE,
            "items": {"type": "array", "items": {**_ITEM, "properties": {**_ITEM["properties"], "relevance": {}}}},
            "not_shown": {**_COUNT, "description": "matches past the text's budget, left out of both"},
            "unsearched_rooms": _UNSEARCHED,
        }
    ),
    "memory_list_recent": _shape(
        {
            "scope": _SCOPE,
            "items": {"type": "array", "items": _ITEM},
            "next_cursor": {
                "type": ["string", "null"],
                "description": "continues right after the last item; null: the end",
            },
            "stopped_early": {"type": "boolean", "description": "a later sub-request failed: fewer items than asked"},
            "unsearched_rooms": _UNSEARCHED,
        }
    ),
    "memory_feedback": _shape(
        {"outcome": {"type": "number"}, "updated": {"type": ["integer", "null"], "description": "null: unknown"}}
    ),
    "memory_stats": _shape(
        {
            "memories": _COUNT,
            "concept_edges": _COUNT,
            "domains": {"type": "array", "items": _TEXT},
            "domains_not_shown": _COUNT,
            "avg_valence": {"type": "number"},
            "feedback": _COUNT,
        }
    ),
    "memory_create_room": _shape({"room_id": _TEXT, "name": _TEXT, "address": _TEXT}),
    "memory_invite_to_room": _shape(
        {
            "invite_id": _TEXT,
            "code": _TEXT,
            "room_address": _TEXT,
            "scope": _TEXT,
            "expires_at": _TEXT,
            "join_url": _TEXT,
            "share_message": _TEXT,
        }
    ),
    "memory_join_room": _shape(
        {"room_id": _TEXT, "name": _TEXT, "address": _TEXT, "scope": _TEXT, "already_member": {"type": "boolean"}}
    ),
    "memory_list_rooms": _shape(
        {
            "rooms": {
                "type": "array",
                "items": _shape(
                    {
                        "room_id": _TEXT,
                        "name": _TEXT,
                        "address": _TEXT,
                        "role": _TEXT,
                        "scope": _TEXT,
                        "archived": {"type": "boolean"},
                    }
                ),
            },
            "not_shown": _COUNT,
        }
    ),
    "vault_list": _shape(
        {"secrets": {"type": "array", "items": _shape({"alias": _TEXT, "context": _TEXT})}, "not_shown": _COUNT}
    ),
}
