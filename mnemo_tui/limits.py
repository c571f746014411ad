"""Provides the wire's limits and the checks of what a caller names (a page size, a scope, a cursor, an alias, a
database URL), and the one JSON spelling of everything mnemo stores, sends and prints."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from mnemo_tui.errors import ValidationError

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

MAX_LIMIT = 100
DEFAULT_LIMIT = 20
MAX_CONTENT = 10_000
MAX_DOMAIN = 100
MAX_METADATA_BYTES = 65_536
MAX_CONCEPTS = 256
MAX_CONCEPT = 200  # characters of one concept (the hosted schema bounds the count only; ours, docs/server.md)
# An entry's wire item, less its principal (<= 200 characters), at most this many bytes: content at its
# bound fits with room to spare, so only concepts can pass it, and a page of 100 stays near 10 MB.
MAX_ENTRY_WIRE_BYTES = 102_400
MAX_PRINCIPAL = 200  # a key's principal (engine/keys.py), and an imported entry's
MAX_AUTHOR_FIELD = 200  # `agent`, `agent_name`: cut to it, as the hosted service caps them (ProvenanceWriteSchema)
# `client_env` values kept (the hosted allow-list, then our own doors'); any other becomes null.
CLIENT_ENVS = frozenset({"cursor", "claude", "chatgpt", "chat", "api", "unknown", "cli", "mcp", "demo"})
MAX_SUPERSEDES = 32
MAX_EXTERNAL_REF = 255
MAX_SECRET_CONTEXT = 10_000  # the hosted service's CreateSecretRequest.context maxLength
ROOM_PREFIX = "xroom:"
# How often a reader of the embedded store looks for others' writes (`recent --follow`, the stdio MCP server's
# subscriptions): its change probe is one cheap pragma.
EMBEDDED_PROBE_SECONDS = 0.2
ROOM_ID = re.compile(r"^room_[0-9A-HJKMNP-TV-Z]{26}\Z")
# Who may delete a room entry: our extension beyond the hosted rules (docs/server.md), held by the
# engine's delete statement (engine/atoms.py `DELETABLE`) and said first by the front ends (refusals.py).
ROOM_DELETE_RULE = "only its author (a read_write member) or the room's owner can delete a room entry"
# What a cursor may be spelled with (the URL-safe base64 alphabet and its padding), at most 512 characters.
# Every page checks one, so it is checked on the ASCII bytes by deleting the alphabet (all of it is the
# alphabet when nothing is left), the cheapest check measured (docs/performance.md, "The engine page").
CURSOR_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_=-"
CURSOR_MAX = 512


def cursor_shaped(cursor: str) -> bool:
    """Whether a cursor has a cursor's shape: 1 to 512 characters of the URL-safe base64 alphabet."""
    if not isinstance(cursor, str) or not 0 < len(cursor) <= CURSOR_MAX or not cursor.isascii():
        return False
    spelled = cursor.encode()
    # Letters and digits only (the issued cursors, hex) is the quick answer.
    return spelled.isalnum() or not spelled.translate(None, CURSOR_ALPHABET)


ALIAS_SHAPE = re.compile(r"^[A-Za-z0-9._-]+\Z")  # \Z: `$` also matches before a final newline


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


class NotJson(ValueError):
    """Text `json.loads` reads that is no JSON a store can keep: NaN or an infinity, or nesting past the stack."""


def _no_constant(name: str) -> Any:
    raise NotJson(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if value - value != 0.0:  # inf - inf is NaN: `1e999` reads as an infinity, which JSON cannot carry
        raise NotJson(f"{text} is past a number's range (it reads as an infinity)")
    return value


_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)


def loads(text: str | bytes) -> Any:
    """JSON as a file mnemo reads must be: `json.loads`, with NaN, infinities (`Infinity`, `1e999`) and nesting
    too deep for the parser refused as `NotJson` (a `ValueError`, as any other JSON that does not parse).

    Raises:
        NotJson: NaN or an infinity, or nesting too deep to parse.
        ValueError: not JSON (`UnicodeDecodeError` for bytes that are not UTF-8, -16 or -32).
    """
    if isinstance(text, bytes):
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise NotJson("nested too deeply to read") from None


def dumps(value: Any) -> str:
    """Compact JSON with UTF-8 kept as is: the one spelling of everything mnemo stores, sends and prints
    (`json.dumps` with these options, through one encoder instead of a new one per call)."""
    return _ENCODER.encode(value)


def check_limit(limit: int) -> int:
    """Validate a page size (1–100)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValidationError(f"limit must be between 1 and {MAX_LIMIT}, got {limit!r}")
    return limit


def parse_scope(scope: str | None) -> str | None:
    """Validate a scope: None (own store), `xroom:<room_id>`, or one own domain (≤ 100 chars).

    Raises:
        ValidationError: an `xroom:` with an empty or malformed id, or a domain too long or blank.
    """
    if scope is None:
        return None
    if not isinstance(scope, str):
        raise ValidationError(f"scope must be text, got {scope!r}")
    if scope.startswith(ROOM_PREFIX):
        room_id = scope[len(ROOM_PREFIX) :]
        if not ROOM_ID.match(room_id):
            raise ValidationError(f"scope {scope!r}: a room address is xroom:room_<26-char ULID>")
        return scope
    if scope[: len(ROOM_PREFIX)].lower() == ROOM_PREFIX:
        raise ValidationError(f"scope {scope!r}: a room address is spelled in lower case, xroom:room_<26-char ULID>")
    if not scope.strip():
        raise ValidationError("scope must not be blank (omit it for your own store)")
    if len(scope) > MAX_DOMAIN:
        raise ValidationError(f"domain is at most {MAX_DOMAIN} characters, got {len(scope)}")
    return scope


def check_consumer(name: str) -> str:
    """A consumer's name as every front end takes it: 1 to 200 characters, not blank.

    Raises:
        ValidationError: a blank or over-long name.
    """
    if not name.strip() or len(name) > 200:
        raise ValidationError("--consumer must be 1 to 200 characters")
    return name


def room_of(scope: str | None) -> str | None:
    """The room id of an `xroom:` scope, else None."""
    if scope is not None and scope.startswith(ROOM_PREFIX):
        return scope[len(ROOM_PREFIX) :]
    return None


def describe_scope(scope: str | None, quote: Callable[[str], str] = repr) -> str:
    """A human name for a scope (`quote=sanitize.quoted` for one a terminal shows: a domain is stored text)."""
    if scope is None:
        return "your own store (all your domains, no rooms)"
    if scope.startswith(ROOM_PREFIX):
        return f"room {scope}"
    return f"domain {quote(scope)} of your own store"
