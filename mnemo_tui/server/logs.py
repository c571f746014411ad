"""Provides the server's structured logs (`mnemo serve --log-format json`): one JSON object a line, for the
access log and every other line the server logs. A field never holds a key, a header, a body or content."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.types import Scope

from mnemo_tui.engine.ids import digest
from mnemo_tui.server.middleware import Caller
from mnemo_tui.server.pool import LOOKUP

if TYPE_CHECKING:
    from mnemo_tui.server.endpoints import Served

FORMATS = ("text", "json")


def stamp(now: float) -> str:
    """UTC, to the millisecond, as RFC 3339."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int((now % 1) * 1000):03d}Z"


def access_json(fields: dict[str, Any]) -> str:
    """An access line as one JSON object (the fields of `middleware.AccessLog`), with its time and level."""
    return json.dumps({"time": stamp(time.time()), "level": "INFO", "logger": "mnemo.access", **fields})


class JsonFormatter(logging.Formatter):
    """Every other record (`mnemo.server`, `uvicorn.error`) as one JSON object: time, level, logger, message
    and, for an error, its traceback as one string."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": stamp(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line)


MAX_KEY_IDS = 4096


class KeyIds:
    """The id (`key_…`) of each key seen, looked up once and kept (bounded), so that a JSON access line names
    the key that made the request without a lookup a request."""

    def __init__(self, lookup: Callable[[str], Awaitable[str]]) -> None:
        self.lookup = lookup
        self.known: dict[str, str] = {}

    async def of(self, key: str) -> str | None:
        held = digest(key)  # kept by its hash, as the store keeps it: no key lingers in the cache
        found = self.known.get(held)
        if found is None:
            try:
                found = await self.lookup(key)
            except Exception:  # noqa: BLE001 - the line is written without it (the store is down)
                return None
            if len(self.known) >= MAX_KEY_IDS:
                self.known.clear()
            self.known[held] = found
        return found or None


def json_access_line(served: Served) -> Callable[[Scope, int, float, str, str, int, int], Awaitable[str]]:
    """The JSON access line (`--log-format json`): each key named by its id, looked up once (`logs.KeyIds`)."""
    key_ids = KeyIds(lambda key: served.pool.run(lambda engine: engine.key_id_for_key(key), at_once=LOOKUP))

    async def line(scope: Scope, status: int, started: float, rid: str, route: str, got: int, sent: int) -> str:
        user = scope.get("user")
        fields = {
            "request_id": rid,
            "method": scope["method"],
            "route": route,
            "status": status,
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
            "bytes_in": got,
            "bytes_out": sent,
            "principal": user.principal if isinstance(user, Caller) else None,
            "key_id": await key_ids.of(user.key) if isinstance(user, Caller) else None,
        }
        return access_json(fields)

    return line
