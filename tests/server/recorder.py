"""A recorder over the server tests (issue 56; `conftest.py` installs it): every answer an app of `mnemo serve`
gives in this process is noted as (method, route template, status), and a test whose answers carry a status
its operation does not declare in `openapi.json` fails at its teardown, naming them. Each test checks its own answers, so it works
alike under pytest-xdist (each worker records its own) and cannot pass by running after another. Servers in
other processes (`mnemo serve` started by a test) are not seen."""

from __future__ import annotations

from typing import Any

from starlette.routing import Match, Route

from mnemo_tui.server import app as app_module
from mnemo_tui.server.endpoints import Methods

DOCUMENT: dict[str, Any] = app_module.document()
Seen = tuple[str, str, int]
seen: list[Seen] = []  # appended to by the servers' threads too (list.append is atomic)


def template(app: Any, scope: dict[str, Any]) -> str | None:
    """The route template a request was routed to (None: no route of the app's table)."""
    route = scope.get("route")
    if not isinstance(route, Route):  # refused before routing (the key), or routed on a copy of the scope
        route = next((r for r in app.routes if isinstance(r, Route) and r.matches(scope)[0] is Match.FULL), None)
    if route is None or not isinstance(route.endpoint, Methods):
        return None  # an unknown path (404), or a mounted app: not an operation of this document
    return route.path.replace(":segment}", "}")


_original = app_module.App.__call__


async def _recording(self: Any, scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        await _original(self, scope, receive, send)
        return

    async def noted(message: Any) -> None:
        if message["type"] == "http.response.start":
            where = template(self, scope)
            if where is not None:
                seen.append((scope["method"], where, int(message["status"])))
        await send(message)

    await _original(self, scope, receive, noted)


def install() -> None:
    """Every app of this process records its answers from now on (once, however often it is called)."""
    if app_module.App.__call__ is not _recording:
        app_module.App.__call__ = _recording  # type: ignore[method-assign]


def undeclared(seen: list[Seen]) -> list[str]:
    """The answers the document does not describe: a status its operation does not list, or a method its path
    does not have answered with anything but 405 (or 401: the key is checked before routing)."""
    wrong = []
    for method, where, status in seen:
        operation = DOCUMENT["paths"].get(where, {}).get(method.lower())
        if operation is None:
            if status not in (401, 405):
                wrong.append(f"{method} {where} answered {status}, and the document has no such operation")
        elif str(status) not in operation["responses"]:
            wrong.append(f"{method} {where} answered {status}, which its operation does not declare")
    return sorted(set(wrong))
