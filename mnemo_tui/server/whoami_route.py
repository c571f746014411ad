"""Provides `GET /api/v1/mnemo/whoami`: the principal and key id of the key sent (mnemo's extension, docs/server.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnemo_tui.server.envelope import ok
from mnemo_tui.server.middleware import caller
from mnemo_tui.server.pool import LOOKUP

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from mnemo_tui.engine.interface import Engine
    from mnemo_tui.server.endpoints import Handler, Served

PATH = "/mnemo/whoami"


def handler(served: Served) -> Handler:
    """The route: the key was checked by the middleware as for every route (401 without a good one); its id
    is read by its hash."""

    async def whoami(request: Request) -> Response:
        who = caller(request)

        def key_id(engine: Engine) -> str:
            return engine.key_id_for_key(who.key)

        found = await served.pool.run(key_id, at_once=LOOKUP)
        return ok({"principal": who.principal, "key_id": found or None})

    return whoami
