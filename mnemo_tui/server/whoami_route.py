"""Provides `GET /api/v1/mnemo/whoami`: the principal and key id of the key sent (mnemo's extension, docs/server.md)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from mnemo_tui.server import auth
from mnemo_tui.server.envelope import error, ok, request_id
from mnemo_tui.server.pool import LOOKUP

if TYPE_CHECKING:
    from mnemo_tui.engine.interface import Engine
    from mnemo_tui.errors import MnemoError
    from mnemo_tui.server.asgi import Request, Response

PATH = "/mnemo/whoami"


class Served(Protocol):
    """What the route needs of the app's shared parts (`app.Served`)."""

    translate: Callable[[BaseException], MnemoError]
    pool: Any

    async def principal(self, key: str) -> str: ...


def handler(served: Served) -> Callable[[Request], Awaitable[Response]]:
    """The route: the key checked as every route checks it (401 without a good one), then its id read by its hash."""

    async def whoami(request: Request) -> Response:
        try:
            key = auth.presented_key(request)
            who = await served.principal(key)
            request.scope["mnemo.principal"] = who

            def key_id(engine: Engine) -> str:
                return engine.key_id_for_key(key)

            found = await served.pool.run(key_id, at_once=LOOKUP)
        except Exception as exc:  # noqa: BLE001 - every failure becomes an envelope
            return error(served.translate(exc), request_id(request))
        return ok({"principal": who, "key_id": found or None})

    return whoami
