"""Provides the server's answers: JSON bodies, and the flat error envelope of docs/server.md for every failure."""

from __future__ import annotations

import logging
import re
import sqlite3
from typing import Any

from starlette.requests import ClientDisconnect, HTTPConnection
from starlette.responses import Response

from mnemo_tui.errors import LocalStateError, MnemoError, RateLimited, Unavailable
from mnemo_tui.limits import dumps as model_dumps

_REQUEST_ID = re.compile(r"^[\x21-\x7e]{1,128}\Z")
JSON = "application/json"
log = logging.getLogger("mnemo.server")


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON, as bytes (`limits.dumps`)."""
    return model_dumps(value).encode()


CANONICAL = {"X-Mnemo-Wire": "canonical"}


class Raw:
    """An answer's bytes made already, with their media type: not one JSON value (the export's JSON lines), or one
    spelled by hand (a write's answer), but never stored RecentItems (those are bytes, `ok`)."""

    def __init__(self, body: bytes, media_type: str) -> None:
        self.body = body
        self.media_type = media_type


_CANONICAL_RAW = (b"x-mnemo-wire", b"canonical")
_JSON_RAW = (b"content-type", JSON.encode())


class Answer(Response):
    """A 200 JSON answer with the headers `Response(body, headers=..., media_type=JSON)` makes, in its order,
    made here (as Starlette's own subclasses set theirs): reading them from a mapping again for every request
    cost more than the rest of the answer."""

    media_type = JSON

    def __init__(self, body: bytes, canonical: bool) -> None:
        self.status_code = 200
        self.background = None
        self.body = body
        length = (b"content-length", b"%d" % len(body))
        self.raw_headers = [_CANONICAL_RAW, length, _JSON_RAW] if canonical else [length, _JSON_RAW]


def ok(body: bytes | Any) -> Response:
    """A 200 answer; `body` is JSON bytes already (feed pages: stored RecentItems, said so), or a value to encode."""
    if isinstance(body, bytes):
        return Answer(body, True)
    if isinstance(body, Raw):
        return Answer(body.body, False) if body.media_type == JSON else Response(body.body, media_type=body.media_type)
    return Answer(dumps(body), False)


REQUEST_ID = "mnemo.request_id"  # the request's id in its scope (`middleware.AccessLog`)


def request_id(request: HTTPConnection) -> str | None:
    """The request's id (`middleware.AccessLog`), else the caller's `X-Request-Id` when it is a sane token
    (at most 128 visible ASCII characters); echoed as `requestId`."""
    found: str | None = request.scope.get(REQUEST_ID)
    if found is not None:
        return found
    return sent_request_id(request.headers.get("x-request-id"))


def sent_request_id(value: str | None) -> str | None:
    """The caller's `X-Request-Id` kept, when it is a sane token; None otherwise."""
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


def error(exc: MnemoError, rid: str | None, headers: dict[str, str] | None = None) -> Response:
    """The flat envelope (`code`, `message`, `requestId`, `retryable`, `details`) with the error's status."""
    extra = {"X-Request-Id": rid} if rid else {}
    if exc.retryable or isinstance(exc, RateLimited):
        extra["Retry-After"] = "1"
    if headers:
        extra.update(headers)
    return Response(dumps(exc.envelope(rid)), status_code=exc.status, headers=extra, media_type=JSON)


def translate(exc: BaseException) -> MnemoError:
    """Any failure as the project's error the envelope says: the store's own faults are 503, a bug is 500
    (logged with its traceback, never shown)."""
    if isinstance(exc, LocalStateError):
        # The server's own store cannot be written (full disk, read-only mount): not the caller's fault.
        log.warning("store unavailable: %s", exc.message)
        return Unavailable(exc.message)
    if isinstance(exc, MnemoError):
        return exc
    if isinstance(exc, ClientDisconnect):
        return Refused(400, "VALIDATION_ERROR", "the request body was cut off")
    if isinstance(exc, sqlite3.OperationalError) and any(w in str(exc) for w in ("locked", "busy", "disk I/O")):
        log.warning("database busy or unavailable: %s", exc)
        return Unavailable("the store is busy; retry shortly")
    log.error("internal error", exc_info=exc)
    return Refused(500, "INTERNAL", "internal server error")
