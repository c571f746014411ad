"""Provides `Face`: mnemo's MCP server (`sdk.build`, the one definition stdio serves too) over the SDK's
streamable HTTP transport, an ASGI app `mnemo serve` mounts at `/mcp` (docs/mcp.md, "Over HTTP").

The server checks the key of every request before it gets here and says whose it is; each call then runs on
the server's database threads as that principal (`Runner`), never on the event loop. One session manager
serves both revisions: 2025-11-25 with sessions (kept by this process; a session answers only the key that
opened it, which the SDK reads from the request's `user`) and 2026-07-28 statelessly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from mnemo_tui.agents import sdk
from mnemo_tui.agents.answers import Answers
from mnemo_tui.agents.subscriptions import Bounds, Feeds, Run, Wakes
from mnemo_tui.backends import Backend
from mnemo_tui.errors import AuthError

T = TypeVar("T")
# Runs `fn(backend)` off the event loop with a backend acting as `principal` (`writes`: it may write).
Runner = Callable[[str, Callable[[Backend], T], bool], Awaitable[T]]
PRINCIPAL = "mnemo.principal"  # the request scope's key naming whose key was checked (set by `Face.__call__`)
KEY = "mnemo.key"  # the key itself (a subscription looks it up again before each notification)


def _who(ctx: Any) -> tuple[str, str]:
    """The principal and key of the request that carries `ctx` (every request to `/mcp` had its key checked)."""
    request = getattr(ctx, "request", None)
    scope = {} if request is None else request.scope
    principal, key = scope.get(PRINCIPAL), scope.get(KEY)
    if not isinstance(principal, str) or not isinstance(key, str):
        raise AuthError("no API key was checked for this request")
    return principal, key


def _reach(run: Runner[Any], agent_name: str | None) -> sdk.Reach:
    """Each call on the server's database threads, as the principal of the request that carries it."""

    async def reach(ctx: Any, work: Callable[[Answers], T], *, writes: bool) -> T:
        request = getattr(ctx, "request", None)
        principal = None if request is None else request.scope.get(PRINCIPAL)
        if not isinstance(principal, str):  # every call arrives in a POST whose key was checked
            raise AuthError("no API key was checked for this request")
        result: T = await run(principal, lambda backend: work(Answers(backend, agent_name)), writes)
        return result

    return reach


class Face:
    """The streamable HTTP app of mnemo's MCP server.

    Args:
        run: how a call reaches the backend as a principal (the server's database threads).
        allowed_hosts, allowed_origins: the SDK's transport security (DNS rebinding): `Host` must be one of
            these (421 else), `Origin`, when sent, too (403 else); `host:*` matches any port.
        max_sessions: 2025-11-25 sessions open at once (past it a new one is 503).
        max_body: a request body's bound in bytes (the server's own check answers first; this is the SDK's).
        idle_seconds: a session with no request in flight for this long is closed (its id then answers 404).
        wakes, read, check, bounds: the feed subscriptions' (`subscriptions.Feeds`): the server's wake hub,
            its reads off the event loop, its key lookup and the subscriptions' bounds; without them the
            server offers none.
    """

    def __init__(
        self,
        run: Runner[Any],
        *,
        allowed_hosts: list[str],
        allowed_origins: list[str],
        max_sessions: int,
        max_body: int,
        idle_seconds: float,
        agent_name: str | None = None,
        wakes: Wakes | None = None,
        read: Run[Any] | None = None,
        check: Callable[[str], Awaitable[object]] | None = None,
        bounds: Bounds | None = None,
    ) -> None:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins
        )
        self.feeds: Feeds | None = None
        if wakes is not None and read is not None and check is not None and bounds is not None:
            self.feeds = Feeds(wakes, read, check, bounds)
        self.manager = StreamableHTTPSessionManager(
            app=sdk.build(_reach(run, agent_name), self.feeds, _who),
            security_settings=security,
            max_request_body_size=max_body,
            max_sessions=max_sessions,
            session_idle_timeout=idle_seconds,
        )

    def running(self) -> AbstractAsyncContextManager[None]:
        """The session manager's life (a mounted app's lifespan does not run: the server's runs this)."""
        return self.manager.run()

    async def __call__(self, scope: Any, receive: Any, send: Any, *, principal: str, key: str) -> None:
        """One HTTP request whose `key` the server checked (it is `principal`'s)."""
        # The SDK keeps a session with the credential that opened it: the key, known here by its digest only.
        digest = hashlib.sha256(key.encode()).hexdigest()
        user = AuthenticatedUser(AccessToken(token=digest, client_id=digest, scopes=[], subject=principal))
        # A copy: the server's own scope keeps its `user` (its access log names the principal).
        await self.manager.handle_request({**scope, "user": user, PRINCIPAL: principal, KEY: key}, receive, send)
