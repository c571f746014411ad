"""Provides the engine rules no database decides: a write's bounds, an entry's wire text, a query's words."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from mnemo_tui import timefmt
from mnemo_tui.errors import Unprocessable, ValidationError
from mnemo_tui.limits import (
    CLIENT_ENVS,
    MAX_AUTHOR_FIELD,
    MAX_CONCEPT,
    MAX_CONCEPTS,
    MAX_CONTENT,
    MAX_DOMAIN,
    MAX_ENTRY_WIRE_BYTES,
    MAX_EXTERNAL_REF,
    MAX_METADATA_BYTES,
    MAX_SUPERSEDES,
    dumps,
    parse_scope,
    room_of,
)
from mnemo_tui.values.model import Entry

if TYPE_CHECKING:
    from typing import Any

    from mnemo_tui.values.writes import WriteRequest

MAX_QUERY = 5000
MAX_TOP_K = 500
MAX_METADATA_DEPTH = 64  # objects and lists nested in metadata (its serializer recursed ~1,000 levels, then failed)


def refuse_nul(field: str, value: object) -> None:
    """Raise `Unprocessable` when a text to be stored holds a NUL: PostgreSQL's text cannot hold one, so every
    engine refuses it alike (a NUL in a search query is only a word separator, see `query_words`). A lone
    surrogate (`\\ud800`, from a JSON escape or an argument of bytes) is refused too: it is no character,
    and UTF-8, which every store and answer is written in, cannot carry it."""
    if not isinstance(value, str):
        return
    if "\x00" in value:
        raise Unprocessable(
            f"{field} holds a NUL character (\\u0000), which no text is stored with; remove it",
            details={"field": field},
        )
    refuse_surrogate(field, value)


def refuse_surrogate(field: str, value: object) -> None:
    """Raise `Unprocessable` when a text holds a lone surrogate: no database driver can encode it, so a text
    to be stored (`refuse_nul`) and a text a read names (`check_read`) are refused alike, naming the field."""
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            raise Unprocessable(
                f"{field} holds a lone surrogate (\\ud800-\\udfff), which is no character; remove it",
                details={"field": field},
            ) from None


def check_read(*fields: tuple[str, object]) -> None:
    """The texts a read names (a query, a scope, an author, an atom id), each (field, value): refused with
    a lone surrogate, which no statement can carry (SQLite's and PostgreSQL's drivers raise
    UnicodeEncodeError, an internal error). A NUL is each engine's affair (`query_words`, `postgres._param`).

    Raises:
        Unprocessable: naming the first field that holds one.
    """
    for field, value in fields:
        refuse_surrogate(field, value)


def check_metadata_tree(metadata: object) -> None:
    """Metadata's depth and text, walked without recursion: at most `MAX_METADATA_DEPTH` levels, no NUL in a
    key or a string.

    Raises:
        Unprocessable: nested too deep, or a NUL in a key or a string.
    """
    stack: list[tuple[object, int]] = [(metadata, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > MAX_METADATA_DEPTH:
                raise Unprocessable(
                    f"metadata is nested more than {MAX_METADATA_DEPTH} levels deep (MAX_METADATA_DEPTH)",
                    details={"limit_depth": MAX_METADATA_DEPTH},
                )
            if isinstance(value, dict):
                for key, inner in value.items():
                    refuse_nul("a metadata key", key)
                    stack.append((inner, depth + 1))
            else:
                stack.extend((inner, depth + 1) for inner in value)
        else:
            refuse_nul("a metadata value", value)


def with_superseded_by(wire: str, superseded_by: str | None) -> str:
    """The stored wire item, plus `superseded_by` when the entry has been replaced."""
    if superseded_by is None:
        return wire
    return f'{wire[:-1]},"superseded_by":"{superseded_by}"}}'


def spliced_entry(row: tuple[Any, ...]) -> Entry:
    """The `Entry` of a row that selects `created_at, atom_id, wire, superseded_by` first, the later
    version spliced into its wire text (`with_superseded_by`)."""
    return Entry(row[0], row[1], with_superseded_by(row[2], row[3]))


def author_of(req: WriteRequest) -> tuple[str | None, str | None, str | None]:
    """The write's `agent`, `agent_name` and `client_env` as they are stored, normalized as the hosted service
    normalizes a supplier's author (ProvenanceWriteSchema): each text cut to `MAX_AUTHOR_FIELD` characters, a
    `client_env` outside `CLIENT_ENVS` (compared trimmed and in lower case) null. Odd values are kept this way
    rather than failing the write; every door's write passes through here (`wire_item`, `AtomOps`)."""
    env = req.client_env.strip().lower() if isinstance(req.client_env, str) else None
    return (
        req.agent[:MAX_AUTHOR_FIELD] if req.agent is not None else None,
        req.agent_name[:MAX_AUTHOR_FIELD] if req.agent_name is not None else None,
        env if env in CLIENT_ENVS else None,
    )


def wire_item(atom: str, req: WriteRequest, created: int, principal: str) -> str:
    """The entry's wire `RecentItem` as JSON, built once at write time (entries are immutable)."""
    agent, agent_name, client_env = author_of(req)
    item: dict[str, Any] = {
        "atom_id": atom,
        "content": req.content,
        "domain": req.domain,
        "created_at": timefmt.to_iso(created),
        "concepts": list(req.concepts),
        "provenance": {
            "principal": principal,
            "agent": agent,
            "agent_name": agent_name,
            "client_env": client_env,
            "is_external": False,
        },
    }
    if req.supersedes:
        item["supersedes"] = list(req.supersedes)
    return dumps(item)


def check_write(req: WriteRequest) -> str | None:
    """Check a write's bounds; returns its metadata serialized (None when it has none).

    Raises:
        ValidationError: content, domain, concepts, metadata, external ref or supersedes out of bounds.
    """
    if not isinstance(req.content, str) or not 1 <= len(req.content) <= MAX_CONTENT:
        given = f", got {len(req.content)}" if isinstance(req.content, str) else ""
        raise ValidationError(f"content must be 1 to {MAX_CONTENT} characters{given}")
    if req.fingerprint is not None and (not isinstance(req.fingerprint, str) or not 1 <= len(req.fingerprint) <= 512):
        raise ValidationError("fingerprint must be 1 to 512 characters")
    if room_of(req.domain) is None:
        if not req.domain or not req.domain.strip() or len(req.domain) > MAX_DOMAIN:
            raise ValidationError(f"domain must be 1 to {MAX_DOMAIN} characters")
    else:
        parse_scope(req.domain)
        if req.supersedes:
            raise ValidationError("room entries cannot supersede (supersedes is refused with an xroom: domain)")
    check_concepts(req.concepts)
    for field, value in (
        ("content", req.content),
        ("domain", req.domain),
        ("external_ref", req.external_ref),
        ("fingerprint", req.fingerprint),
        ("agent", req.agent),
        ("agent_name", req.agent_name),
        ("client_env", req.client_env),
    ):
        if isinstance(value, str) and ("\x00" in value or not value.isascii()):  # else nothing to refuse: no call
            refuse_nul(field, value)
    for field, value in (("agent", req.agent), ("agent_name", req.agent_name), ("client_env", req.client_env)):
        if value is not None and not isinstance(value, str):
            raise ValidationError(f"{field} must be text or null")
    if req.external_ref is not None and not 1 <= len(req.external_ref) <= MAX_EXTERNAL_REF:
        raise ValidationError(f"external_ref must be 1 to {MAX_EXTERNAL_REF} characters")
    if len(req.supersedes) > MAX_SUPERSEDES:
        raise ValidationError(f"supersedes takes at most {MAX_SUPERSEDES} ids")
    if len(set(req.supersedes)) != len(req.supersedes):
        raise ValidationError("supersedes ids must be distinct")
    if req.supersedes:
        import uuid  # only a superseding write needs it; `mnemo recent` never pays for the import

        for old in req.supersedes:
            try:
                uuid.UUID(old)
            except ValueError:
                raise ValidationError(f"supersedes: {old!r} is not an atom id") from None
    check_wire_size(req)
    if req.metadata is None:
        return None
    check_metadata_tree(req.metadata)
    try:
        metadata = json.dumps(req.metadata, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        raise ValidationError("metadata holds NaN or Infinity, which JSON cannot carry") from None
    if len(metadata.encode()) > MAX_METADATA_BYTES:
        raise ValidationError(f"metadata is at most {MAX_METADATA_BYTES} bytes serialized")
    return metadata


def check_concepts(concepts: tuple[str, ...]) -> None:
    """A write's concepts: at most `MAX_CONCEPTS`, each text of at most `MAX_CONCEPT` characters with no NUL.

    Raises:
        Unprocessable: past a bound, the message naming the field (`concepts`, `concepts.N` on the wire).
    """
    if len(concepts) > MAX_CONCEPTS:
        raise Unprocessable(
            f"concepts: at most {MAX_CONCEPTS} concepts, got {len(concepts)}", details={"field": "concepts"}
        )
    for n, concept in enumerate(concepts):
        if not isinstance(concept, str):
            raise Unprocessable(f"concepts.{n}: a concept is text", details={"field": f"concepts.{n}"})
        if len(concept) > MAX_CONCEPT:
            raise Unprocessable(
                f"concepts.{n}: a concept is at most {MAX_CONCEPT} characters, got {len(concept):,}",
                details={"field": f"concepts.{n}"},
            )
        refuse_nul("a concept", concept)


# The wire item's text beside its fields' (keys, quotes, an id, a time, `is_external`): under 300 bytes.
_ITEM_FRAME = 300
_ZERO_ID = "00000000-0000-0000-0000-000000000000"


def check_wire_size(req: WriteRequest) -> None:
    """The entry's wire item, less its principal, is at most `MAX_ENTRY_WIRE_BYTES`: measured only when the
    text it carries could pass it (a character is at most 6 bytes of JSON, `\\u001f`), so an ordinary
    write pays a few additions. Content at its bound fits, so what passes it is the concepts.

    Raises:
        Unprocessable: the entry would be larger on the wire, naming `concepts`.
    """
    chars = (
        len(req.content) + len(req.domain) + sum(map(len, req.concepts)) + 3 * (len(req.concepts) + MAX_AUTHOR_FIELD)
    )
    if 6 * chars + 40 * len(req.supersedes) + _ITEM_FRAME <= MAX_ENTRY_WIRE_BYTES:
        return
    size = len(wire_item(_ZERO_ID, req, 0, "").encode())
    if size > MAX_ENTRY_WIRE_BYTES:
        raise Unprocessable(
            f"concepts: the entry would be {size:,} bytes on the wire, and an entry is at most "
            f"{MAX_ENTRY_WIRE_BYTES:,} (MAX_ENTRY_WIRE_BYTES): fewer or shorter concepts",
            details={"field": "concepts", "limit_bytes": MAX_ENTRY_WIRE_BYTES},
        )


# Outcomes read back: a NaN or an infinity stored before `check_outcome` (PostgreSQL kept NaN, SQLite an
# infinity) is left out, so no answer carries a number JSON cannot (NaN is above every number in PostgreSQL).
FINITE_OUTCOME = "outcome BETWEEN -1 AND 1"


def check_outcome(outcome: object) -> float:
    """A feedback outcome: a finite number from -1 to 1 (NaN and the infinities are no number a store keeps).

    Raises:
        Unprocessable: not a number, not finite, or outside -1..1, naming `outcome`.
    """
    if isinstance(outcome, bool) or not isinstance(outcome, int | float):
        raise Unprocessable("outcome must be a number from -1 to 1", details={"field": "outcome"})
    try:
        value = float(outcome)
    except OverflowError:  # an integer past a float's range
        value = float("inf")
    if not -1.0 <= value <= 1.0:  # NaN compares false both ways, so it is refused here too
        raise Unprocessable(f"outcome must be a finite number from -1 to 1, got {value}", details={"field": "outcome"})
    return value


def query_words(text: str) -> list[str]:
    """The words of a search query, as every engine matches them: split on white space, each kept verbatim.

    Raises:
        ValidationError: an empty or blank query (the feed is the read without a query), or one too long.
    """
    if not text or not text.strip():
        raise ValidationError("search needs a query; to list what happened lately, use `mnemo recent`")
    if len(text) > MAX_QUERY:
        raise ValidationError(f"query is at most {MAX_QUERY} characters")
    # A NUL separates words: no text needs one, and FTS5 ends a string at it ("unterminated string").
    return [word for word in text.replace("\x00", " ").split() if any(ch.isalnum() for ch in word)]


def check_search(top_k: int, since: int | None, until: int | None) -> None:
    """Check a search's bounds.

    Raises:
        ValidationError: `top_k` outside 1–500, or `until` before `since`.
    """
    if not 1 <= top_k <= MAX_TOP_K:
        raise ValidationError(f"top_k must be between 1 and {MAX_TOP_K}")
    if since is not None and until is not None and until < since:
        raise ValidationError("until is before since")
