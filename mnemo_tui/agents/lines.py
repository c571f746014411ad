"""Provides the JSON-RPC 2.0 rules for one line of `mnemo mcp`'s stdin that the SDK's reader does not apply
(stdlib only): strict JSON, the answer owed to a line it would drop, lone surrogates replaced.

The SDK's stdio reader drops, unanswered, every line it cannot turn into a message (a malformed line, a batch,
an invalid request with its id, a lone `\\ud800` escape) and accepts `NaN`; JSON-RPC 2.0 answers each of them.
`sdk.py` puts `check` in front of that reader.
"""

from __future__ import annotations

import json
import re
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
MAX_LINE = 4 * 1024 * 1024  # characters; a longer line is refused whole (the largest call is ~60 KB of JSON)

_LONE = re.compile(r"\\u[dD][89abcdefABCDEF]")  # a surrogate can only arrive as an escape (stdin is UTF-8)
_SURROGATE = re.compile("[\ud800-\udfff]")


class Refusal:
    """The error answer a line gets instead of reaching the SDK: its code, message and the id to answer."""

    __slots__ = ("code", "message", "request_id")

    def __init__(self, code: int, message: str, request_id: str | int | None = None) -> None:
        self.code, self.message, self.request_id = code, message, request_id


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # json.loads calls this for NaN, Infinity and -Infinity


def _replace_surrogates(value: Any) -> Any:
    """`value` with every lone surrogate replaced by U+FFFD, as the reader replaces invalid UTF-8."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    return value


def request_id(value: object) -> str | int | None:
    """The id a message carries when it is one MCP accepts (a string or an integer, never a bool), else None."""
    if isinstance(value, dict):
        found = value.get("id")
        if isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)):
            return found
    return None


def check(line: str) -> tuple[str, Any] | list[Refusal]:
    """The line to hand the SDK and its parsed value, or the refusals to answer instead (one per request of a
    batch that carries an id, else one with id null).

    Not handed on: a line that is not strict JSON (-32700, id null); a batch, or an object that carries an `id`
    MCP does not accept (a number with a fraction, a bool, null), or `method` with a bad `id` (-32600: the SDK
    would read it as a notification and never answer). A line with a lone surrogate is handed on re-encoded,
    each one replaced by U+FFFD.
    """
    if len(line) > MAX_LINE:
        return [Refusal(PARSE_ERROR, f"Parse error: a line longer than {MAX_LINE:,} characters is not read")]
    try:
        value = json.loads(line, parse_constant=_constant)
        if _LONE.search(line):
            value = _replace_surrogates(value)
            line = json.dumps(value, ensure_ascii=False)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than Python's stack
        return [Refusal(PARSE_ERROR, f"Parse error: {str(exc)[:200]}")]
    if isinstance(value, list):
        # MCP has no batches (2025-06-18); each request in one is refused under its own id.
        why = "Invalid Request: batches are not supported (send one message a line)"
        ids = [i for i in (request_id(v) for v in value) if i is not None]
        return [Refusal(INVALID_REQUEST, why, i) for i in ids] or [Refusal(INVALID_REQUEST, why)]
    if not isinstance(value, dict):
        return [Refusal(INVALID_REQUEST, "Invalid Request: a message is a JSON object")]
    if "id" in value and request_id(value) is None:
        return [Refusal(INVALID_REQUEST, "Invalid Request: an id is a string or an integer")]
    return line, value


def invalid(value: Any) -> list[Refusal]:
    """The refusal of a JSON object the SDK could not read as a message: under its id when it has one."""
    return [Refusal(INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message MCP reads", request_id(value))]
