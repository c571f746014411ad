"""Provides the server's answers: JSON bodies, and the flat error envelope of WIRE.md for every failure."""

from __future__ import annotations

import re
from typing import Any

from mnemo_tui.errors import MnemoError, RateLimited
from mnemo_tui.limits import dumps as model_dumps
from mnemo_tui.server.asgi import Request, Response

_REQUEST_ID = re.compile(r"^[\x21-\x7e]{1,128}\Z")


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON, as bytes (`limits.dumps`)."""
    return model_dumps(value).encode()


CANONICAL = {"X-Mnemo-Wire": "canonical"}


class Raw:
    """An answer that is not one JSON value (the export's JSON lines), with its media type."""

    def __init__(self, body: bytes, media_type: str) -> None:
        self.body = body
        self.media_type = media_type


def ok(body: bytes | Any) -> Response:
    """A 200 answer; `body` is JSON bytes already (feed pages: stored RecentItems, said so), or a value to encode."""
    if isinstance(body, Raw):
        return Response(body.body, media_type=body.media_type)
    if isinstance(body, bytes):
        return Response(body, headers=dict(CANONICAL))
    return Response(dumps(body))


def request_id(request: Request) -> str | None:
    """The caller's `X-Request-Id`, when it is a sane token (echoed as `requestId`)."""
    value = request.headers.get("x-request-id")
    if value is None or not _REQUEST_ID.match(value):
        return None
    return value


class Refused(MnemoError):
    """A failure with a code and status of its own (unknown route, method not allowed, internal error)."""

    def __init__(self, status: int, code: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.retryable = retryable


def error(exc: MnemoError, rid: str | None) -> Response:
    """The flat envelope (`code`, `message`, `requestId`, `retryable`, `details`) with the error's status."""
    headers = {"X-Request-Id": rid} if rid else {}
    if exc.retryable or isinstance(exc, RateLimited):
        headers["Retry-After"] = "1"
    return Response(dumps(exc.envelope(rid)), status=exc.status, headers=headers)
