"""Provides the MCP surface of `mnemo mcp`: the hosted package's ten tools (names, descriptions, input schemas,
annotations), its instructions, its three prompts and its resource template, as plain data (no SDK here).

The tools are those of `@mnemoverse/mcp-memory-server@0.10.2` (tests/agents/hosted-tools-list.json is its
`tools/list`, compared tool by tool in tests/agents/test_answers.py), so an agent's calls carry over unchanged.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

SERVER_NAME = "mnemo"

TOOLS: list[dict[str, Any]] = [
    {
        "name": "memory_write",
        "description": "Store a long-term memory that persists across sessions AND across every AI tool the user "
        "has connected to Mnemoverse (Claude, ChatGPT, Cursor, VS Code) — write once, recall "
        "everywhere. Call this PROACTIVELY the moment the user states a preference, makes a "
        "decision, or you learn a durable fact (people, roles, project setup, a lesson). Don't wait "
        "to be asked. Never store passwords, API keys, payment data, MFA codes, government IDs, or "
        "health records; skip transient chatter that only matters this turn. Behavior: an "
        "importance gate may filter low-value writes, so the result tells you whether the memory "
        "was stored or filtered. Write `content` as a self-contained statement that still makes "
        "sense when recalled out of context.",
        "inputSchema": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "content": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 10000,
                    "description": "The memory to store as a self-contained "
                    "statement, e.g. 'User prefers TypeScript strict "
                    "mode' or 'Decided to deploy the API on "
                    "Cloudflare Workers (2026-06)'.",
                },
                "concepts": {
                    "description": "Key concepts for linking related memories (e.g. ['deploy', 'friday', 'staging'])",
                    "type": "array",
                    "items": {"type": "string"},
                },
                "domain": {
                    "description": "Namespace to organize memories (e.g. "
                    "'engineering', 'user:alice', 'project:acme'). "
                    "Matched byte-for-byte — a leading space, a "
                    "different case, or an invisible character opens "
                    "a SEPARATE, permanent store, so reuse an exact "
                    "name from memory_stats rather than retyping one. "
                    "To write into a shared room, pass its address "
                    "here instead (e.g. 'xroom:room_01ABC'). Find "
                    "room addresses with memory_list_rooms.",
                    "type": "string",
                },
            },
            "required": ["content"],
        },
        "annotations": {
            "title": "Store Memory",
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": False,
            "openWorldHint": True,
        },
    },
    {
        "name": "memory_read",
        "description": "Search your long-term memory before answering anything that may have come up before — user "
        "preferences, past decisions, project setup, people, or earlier context. This memory is "
        "shared: it persists across sessions and across every AI tool the user has connected "
        "(Claude, ChatGPT, Cursor, VS Code). ALWAYS check here first when you're unsure whether you "
        "already know something; no need to call it for general world knowledge you already hold. "
        "Returns matches ranked by relevance (or newest-first with order_by: 'recency'); each "
        "result carries an id you can pass to memory_feedback. A wrong or stale memory is corrected "
        "by writing a fresh one with memory_write, not by deleting it.",
        "inputSchema": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 5000,
                    "description": "Natural-language description of what you're "
                    "looking for, e.g. 'database choice for the API' "
                    "or 'user's preferred testing framework'.",
                },
                "top_k": {
                    "description": "Requested number of results (default: 5). ⚠️ Not "
                    "a hard cap: association expansion can return MORE "
                    "than this, and the relevance floor can return "
                    "fewer — raising it does not reliably widen the "
                    "result set. For a complete, exactly-bounded "
                    "listing use memory_list_recent instead.",
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 50,
                },
                "domain": {
                    "description": "Restrict the search to one domain namespace "
                    "(e.g. 'project:acme'). Omitting it searches your "
                    "OWN domains — it does NOT include shared rooms, "
                    "which are separate stores: to search a room, "
                    "pass its address here (e.g. 'xroom:room_01ABC'). "
                    "Find room addresses with memory_list_rooms.",
                    "type": "string",
                },
                "order_by": {
                    "description": "'relevance' (default) = ranking order. "
                    "'recency' = the matched set re-sorted "
                    "newest-first. For a complete newest-first feed "
                    "with no search at all, use memory_list_recent "
                    "instead.",
                    "type": "string",
                    "enum": ["relevance", "recency"],
                },
                "since": {
                    "description": "Only memories created at/after this ISO-8601 "
                    "instant (naive = UTC) — e.g. your last-seen "
                    "watermark in a shared room.",
                    "type": "string",
                    "maxLength": 40,
                },
                "until": {
                    "description": "Only memories created at/before this ISO-8601 instant.",
                    "type": "string",
                    "maxLength": 40,
                },
                "exclude_author": {
                    "description": "Drop memories written by this author "
                    "PRINCIPAL — the server-side identity. ⚠️ "
                    "NOT USABLE FROM HERE YET: the principal "
                    "is not shown in these results, so there "
                    "is no value you can obtain through this "
                    "tool, and a guess like 'me' silently "
                    "matches nothing and filters nothing. "
                    "Only pass it if your system knows the "
                    "exact principal from elsewhere (e.g. the "
                    "REST API). A self-exclusion shortcut is "
                    "planned.",
                    "type": "string",
                    "maxLength": 200,
                },
            },
            "required": ["query"],
        },
        "annotations": {
            "title": "Search Memories",
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": True,
        },
    },
    {
        "name": "memory_list_recent",
        "description": "List the NEWEST memories first — no search query needed. Semantic search answers 'what do "
        "I know about X'; this answers 'what happened lately': resuming work after a break, "
        "catching up on a shared room ('any new messages?'), or reviewing what was saved recently. "
        "Pass `since` (your last-seen time) to get only what's new, and page through older entries "
        "with the returned cursor. Complete by construction WITHIN ONE SCOPE — nothing is skipped "
        "there, unlike a semantic search. A page is also bounded by SIZE, so a page of long entries "
        "comes back shorter than `limit` and hands you a cursor for the rest — nothing is dropped, "
        "and following the cursor is how you get it. To catch up on a shared room you MUST pass its "
        "address as `domain`: rooms are separate stores and an unscoped call never covers them.",
        "inputSchema": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "domain": {
                    "description": "Restrict to one domain. REQUIRED to read a "
                    "shared room — pass its address "
                    "('xroom:room_01ABC'), because rooms are separate "
                    "stores that an unscoped feed does NOT cover. "
                    "Omit only when you mean your own domains. Room "
                    "addresses come from memory_list_rooms. Room "
                    "entries are often long — a room feed usually "
                    "reaches its size budget after a handful of them, "
                    "so expect to page (see `limit`).",
                    "type": "string",
                },
                "since": {
                    "description": "Only entries created at/after this ISO-8601 "
                    "instant (naive = UTC) — your novelty watermark.",
                    "type": "string",
                },
                "until": {
                    "description": "Only entries created at/before this ISO-8601 "
                    "instant (inclusive). Pair with `since` to read a "
                    "closed window — 'what happened on Monday' — "
                    "instead of paging back from now.",
                    "type": "string",
                },
                "exclude_author": {
                    "description": "Drop entries written by this author "
                    "PRINCIPAL. ⚠️ NOT USABLE FROM HERE YET — "
                    "the principal is never shown in these "
                    "results, so there is no value you can "
                    "get through this tool; a guess like 'me' "
                    "filters nothing, silently. Same caveat "
                    "as on memory_read.",
                    "type": "string",
                    "maxLength": 200,
                },
                "limit": {
                    "description": "Most entries per page (default: 20). Newest "
                    "first. ⚠️ A CEILING, not a promise: the page is "
                    "ALSO bounded by size, so a page of long entries "
                    "stops early and returns a cursor for the rest. In "
                    "rooms whose entries run long, ask for 5–10 — a "
                    "large `limit` there buys nothing the size budget "
                    "will not take back, and costs round trips.",
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 100,
                },
                "cursor": {
                    "description": "Opaque cursor from a previous page's 'More older "
                    "entries exist' line — continues the listing "
                    "without skips or duplicates.",
                    "type": "string",
                    "maxLength": 512,
                },
            },
        },
        "annotations": {
            "title": "List Recent Memories",
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": True,
        },
    },
    {
        "name": "memory_feedback",
        "description": "Report whether memories returned by memory_read were actually helpful. This is a learning "
        "signal, not a log: positive feedback raises a memory's ranking so it surfaces faster next "
        "time (across all of the user's tools), negative feedback lowers it so other memories "
        "out-rank it — nothing is erased and nothing decays with time. Call it right after you act "
        "on (or reject) recalled memories, passing the ids from the memory_read results. NOTE: this "
        "reaches your own domains only — it takes no domain argument, so rating a memory that lives "
        "in a shared room silently does nothing.",
        "inputSchema": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "atom_ids": {
                    "minItems": 1,
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "IDs of memories to give feedback on (from memory_read results)",
                },
                "outcome": {
                    "type": "number",
                    "minimum": -1,
                    "maximum": 1,
                    "description": "How helpful was this? 1.0 = very helpful, 0 = neutral, -1.0 = harmful/wrong",
                },
            },
            "required": ["atom_ids", "outcome"],
        },
        "annotations": {
            "title": "Rate Memory Helpfulness",
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": False,
            "openWorldHint": True,
        },
    },
    {
        "name": "memory_stats",
        "description": "Get an overview of the stored memory: total count, episodes vs consolidated prototypes, "
        "number of learned associations, the list of domains, and average quality scores. This "
        "memory is shared across all AI tools the user has connected to Mnemoverse. Use it to "
        "orient yourself, to confirm the exact domain name before writing to it, or when the user "
        "asks what you remember. Read-only — changes nothing.",
        "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {}},
        "annotations": {
            "title": "Memory Statistics",
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": True,
        },
    },
    {
        "name": "memory_create_room",
        "description": "Create a SHARED memory room — a space OTHER people's assistants can read, and write too "
        "when their invite granted read_write (the default scope), across Claude/ChatGPT/Cursor. "
        "Use when the user wants to share context or collaborate with someone else (e.g. 'make a "
        "room for me and Olya'). Returns the room's address; pass that address as the `domain` on "
        "memory_write/memory_read to use it. To bring someone in, call memory_invite_to_room next.",
        "inputSchema": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "name": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 200,
                    "description": "Room name, unique within your account (e.g. 'me-and-olya').",
                },
                "description": {
                    "description": "Optional description of the room.",
                    "type": "string",
                    "maxLength": 2000,
                },
            },
            "required": ["name"],
        },
        "annotations": {
            "title": "Create shared room",
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": False,
            "openWorldHint": True,
        },
    },
    {
        "name": "memory_invite_to_room",
        "description": "Mint a one-time invite for a room you own and get a ready-to-forward message. The user "
        "sends that message to the person they want to add (any messenger); the recipient opens the "
        "link or tells THEIR assistant the code to join. Use after memory_create_room, or whenever "
        "the user says 'invite <someone>' to an existing room.",
        "inputSchema": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "room_id": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 100,
                    "description": "The room's id (room_...), from memory_create_room.",
                },
                "scope": {
                    "description": "Role the invitee gets — 'read' or 'read_write' (default read_write).",
                    "type": "string",
                    "enum": ["read", "read_write"],
                },
                "expires_in_days": {
                    "description": "Days until the invite expires (default 7).",
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 90,
                },
            },
            "required": ["room_id"],
        },
        "annotations": {
            "title": "Invite to room",
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": False,
            "openWorldHint": True,
        },
    },
    {
        "name": "memory_join_room",
        "description": "Join a shared memory room using an invite code (starts with 'mnvr_'). Use when the user "
        "pastes an invite code or says something like 'join room with code ...'. After joining, use "
        "the returned address as the `domain` on memory_read to read the shared room — the result "
        "tells you what you may do with it: memory_write to that address is only allowed when your "
        "membership scope is read_write; a read-only membership has that write refused; and when "
        "the server does not report a scope, whether memory_write would succeed is stated as "
        "unknown rather than promised either way.",
        "inputSchema": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 200,
                    "description": "The invite code (mnvr_...).",
                }
            },
            "required": ["code"],
        },
        "annotations": {
            "title": "Join room",
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": True,
        },
    },
    {
        "name": "memory_list_rooms",
        "description": "List the shared memory rooms you can use — the ones you OWN plus the ones you've JOINED — "
        "each with the address to pass as `domain` on memory_read, and on memory_write too where "
        "your membership scope is read_write; a read-only membership has that write refused. Use "
        "this to RE-FIND a room in a new session (e.g. 'what rooms do I have?', 'resume the room "
        "with Olya') instead of having to create or re-join it.",
        "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {}},
        "annotations": {
            "title": "List rooms",
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": True,
        },
    },
    {
        "name": "vault_list",
        "description": "List the secrets stored in your Mnemoverse Vault — by ALIAS and purpose only; the secret "
        "VALUE is never returned or shown to you, and no tool on this server returns it. Use this "
        "to check WHICH secrets the user has stored and under what alias (e.g. the user says 'do I "
        "have a GitHub token saved?'). Only YOUR account's secrets are listed.",
        "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {}},
        "annotations": {
            "title": "List vault secrets",
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": True,
        },
    },
]

# The package's instructions, less what mnemo has no part of (its service names no other tools).
INSTRUCTIONS = (
    "You own this long-term memory. It persists across sessions and every AI tool this user connects. "
    "Use it as a habit: memory_read before answering anything that may have come up; memory_write the moment "
    "you learn a durable fact, preference or decision — don't wait to be asked. Shared rooms are SEPARATE "
    "stores: to read one, pass its address as domain (memory_list_rooms); unscoped reads never cover rooms. "
    "Rate recalls with memory_feedback; memory_stats shows counts; memory_list_recent is newest-first. To "
    "correct a wrong memory, write a fresh one — deletion is administrative, not a tool. Rooms: "
    "memory_create_room, memory_invite_to_room, memory_join_room. vault_list names secrets by alias, never "
    "values. Never store passwords, API keys, payment data, MFA codes, government IDs, or health records."
)

# The package's prompts (src/prompts.ts of its later versions): name -> title, description, arguments.
PROMPTS: dict[str, dict[str, Any]] = {
    "recall": {
        "title": "Recall from memory",
        "description": "Search your memory for saved information about a specific topic.",
        "arguments": [("topic", "What to recall — a topic, project, person, or open question.", True)],
    },
    "save_insight": {
        "title": "Save an insight to memory",
        "description": "Store a new insight, fact, or decision in your long-term memory.",
        "arguments": [
            ("insight", "The insight, fact, or decision to remember.", True),
            ("domain", "Optional domain/category to file it under (e.g. 'project-x').", False),
        ],
    },
    "what_do_you_know": {
        "title": "What do you know about…",
        "description": "Get a briefing of what your memory holds about a subject.",
        "arguments": [("subject", "The subject to brief on.", True)],
    },
}


def prompt_text(name: str, args: dict[str, str]) -> str:
    """The one user message a prompt returns (the package's wording; arguments but `domain` trimmed)."""
    if name == "recall":
        return (
            f'Use memory_read to search my saved memories for this specific topic: "{args["topic"]}". '
            "Summarize only the returned memory text. If nothing relevant is stored, say so plainly."
        )
    if name == "save_insight":
        domain = args.get("domain")
        under = f' under the domain "{domain}"' if domain else ""
        return (
            f'Use the memory_write tool to store this insight in my long-term memory{under}: "{args["insight"]}". '
            "Then confirm exactly what was stored."
        )
    return (
        f'Use memory_read to look up what I have explicitly stored about "{args["subject"]}". Give me a concise '
        "briefing based only on the returned memory text and flag gaps where nothing is stored."
    )


RESOURCE_TEMPLATE = "memory://item/{memory_id}"
RESOURCE_PREFIX = "memory://item/"
RESOURCE_NAME = "memory-item"
RESOURCE_TITLE = "Saved memory"
RESOURCE_DESCRIPTION = (
    "Read one saved memory by its memory ID. IDs come from memory_read and memory_list_recent results. Opens "
    "memories in your own store, and (a mnemo extension) entries of a shared room you belong to."
)

# The feeds (a mnemo extension, docs/mcp.md "Feeds"): the own store, or one scope as one percent-encoded segment.
FEED_URI = "memory://feed"
FEED_PREFIX = "memory://feed/"
FEED_TEMPLATE = "memory://feed/{scope}"
FEED_NAME = "memory-feed"
FEED_TITLE = "Memory feed"
FEED_DESCRIPTION = (
    "The newest page of your own store's feed (memory_list_recent's page, as JSON with its next_cursor). "
    "Subscribe to hear when an entry lands in it or is removed; read it again then."
)
FEED_SCOPE_NAME = "memory-feed-scope"
FEED_SCOPE_TITLE = "Memory feed of one scope"
FEED_SCOPE_DESCRIPTION = (
    "The newest page of one scope's feed, as JSON with its next_cursor: a domain of your own store, or "
    "xroom:<room_id> of a shared room you belong to, percent-encoded as one segment (team/alpha is "
    "memory://feed/team%2Falpha). Subscribe to hear when an entry lands in it or is removed."
)


def feed_scope(uri: str) -> str | None:
    """The scope a feed URI names (None: the own store), exactly one percent-encoded segment after the prefix.

    Raises:
        LookupError: `uri` names no feed (another resource, an empty or a second segment).
    """
    if uri == FEED_URI:
        return None
    segment = uri[len(FEED_PREFIX) :] if uri.startswith(FEED_PREFIX) else ""
    if not segment or "/" in segment or "?" in segment or "#" in segment:
        raise LookupError(uri)
    try:
        return unquote(segment, errors="strict")
    except UnicodeDecodeError:  # not UTF-8 once decoded: no scope is spelled so
        raise LookupError(uri) from None
