"""Provides `Calls`: the calls of a `RemoteBackend` to its endpoint, each retried with backoff within one deadline.

The API key is checked before any call (a key no server could accept fails at once), and a 404 where docs/server.md
has none is read as a wrong base URL.
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from collections.abc import Callable, Mapping
from hashlib import sha256
from typing import Any

from mnemo_tui import __version__
from mnemo_tui.backends.proxies import BadProxy
from mnemo_tui.backends.remote_http import (
    NOT_PROCESSED_STATUS,
    TRANSIENT_STATUS,
    Answer,
    DeadlinePassed,
    Http,
    TooLarge,
    TransportError,
    error_of,
    retry_after,
    said_retryable,
)
from mnemo_tui.errors import AuthError, NotFound, Unavailable, ValidationError
from mnemo_tui.limits import dumps

CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 30.0  # any one send or receive
RETRIES = 4
BACKOFF = 0.25
MAX_WAIT = 30.0
DEADLINE = 60.0  # seconds for one call's whole answer, retries included (MNEMO_DEADLINE)
# A streamed walk asks for NDJSON and takes JSON (one page) from an endpoint that has no stream.
STREAM_ACCEPT = "application/x-ndjson, application/json;q=0.5"


def deadline_of(environ: Mapping[str, str]) -> float:
    """The deadline of one call: `MNEMO_DEADLINE` seconds when set, else `DEADLINE`.

    Raises:
        ValidationError: a value that is not a number of seconds above zero.
    """
    value = environ.get("MNEMO_DEADLINE", "").strip()
    if not value:
        return DEADLINE
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise ValidationError(f"MNEMO_DEADLINE is {value!r}: it must be a number of seconds above zero (e.g. 60)")
    return seconds


def check_key(key: str) -> str:
    """A key as sent: white space around it (a file's newline, a pasted space) stripped.

    Raises:
        AuthError: a key that cannot be one (empty, spaces inside, anything but printable ASCII): at once,
            rather than after the retries of a request no server could accept.
    """
    key = key.strip()
    if not key or not key.isascii() or not key.isprintable() or " " in key:
        raise AuthError(
            "the API key is malformed: a key is printable ASCII without spaces (check MNEMO_API_KEY or `mnemo login`)"
        )
    return key


def key_principal(key: str) -> str:
    """The watermark principal of a key: `key:` + 12 hex chars of its SHA-256 (the key itself is never stored)."""
    return "key:" + sha256(key.encode()).hexdigest()[:12]


def _without_userinfo(url: str) -> str:
    """A URL as it may be shown: a `user:password@` in it replaced by `***@`."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rsplit("@", 1)[1]
    return scheme + sep + authority + slash + path


# The only calls whose 404 is an answer (an unknown atom, invite code or secret alias) rather than a wrong base URL.
_MAY_BE_404 = (
    "/memory/atoms/",
    "/memory/rooms/join",
    "/vault/secrets/by-alias/",
    "/memory/removals",  # `remote_removals.PATH` (its module, and the state database it loads, only when called)
    "/mnemo/consumers",  # `remote_consumers.PATH`: a consumer with no position (its reason), or an endpoint that keeps none
)


class Calls:
    """One endpoint called with one API key over one keep-alive HTTP client (the transport of `RemoteBackend`).

    Attributes:
        identity: the endpoint URL (watermarks are keyed by it).
    """

    def __init__(
        self,
        endpoint: str,
        api_key: str,
        *,
        connect_timeout: float = CONNECT_TIMEOUT,
        read_timeout: float = READ_TIMEOUT,
        retries: int = RETRIES,
        backoff: float = BACKOFF,
        max_wait: float = MAX_WAIT,
        deadline: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        endpoint = endpoint.rstrip("/")
        if not endpoint.startswith(("http://", "https://")):
            raise ValidationError(f"endpoint {endpoint!r} must be an http:// or https:// URL (e.g. .../api/v1)")
        api_key = check_key(api_key)
        self.identity = endpoint
        self._principal = key_principal(api_key)
        self.retries = retries
        self.backoff = backoff
        self.max_wait = max_wait
        self.deadline = deadline_of(os.environ) if deadline is None else deadline
        self._sleep = sleep
        self._jitter = jitter  # a draw in [0, 1) that spreads the waits of many clients (tests fix it)
        try:
            self._client = Http(
                endpoint,
                {
                    "X-Api-Key": api_key,
                    "User-Agent": f"mnemo/{__version__}",
                    "Accept": "application/json",
                    "Content-Type": "application/json",
                },
                connect_timeout=connect_timeout,
                read_timeout=read_timeout,
                environ=os.environ,
            )
        except BadProxy as exc:
            raise ValidationError(f"{exc}: fix or unset HTTPS_PROXY, HTTP_PROXY and ALL_PROXY") from None
        except ValueError as exc:
            raise ValidationError(f"endpoint {_without_userinfo(endpoint)!r} is not a usable URL ({exc})") from None

    def close(self) -> None:
        self._client.close()

    def _delay(self, attempt: int) -> float:
        return float(min(self.max_wait, self.backoff * (2**attempt) * (0.5 + self._jitter() / 2)))

    def _wait_to_retry(self, attempt: int, deadline: float, said_wait: float | None = None) -> bool:
        """Wait before the next attempt when one is left and its wait ends before the deadline; else False.

        `said_wait` is the endpoint's `Retry-After` (bounded by `max_wait`); without it, the backoff.
        """
        if attempt >= self.retries:
            return False
        wait = min(self.max_wait, said_wait) if said_wait is not None else self._delay(attempt)
        if time.monotonic() + wait >= deadline:
            return False
        self._sleep(wait)
        return True

    def _call(self, method: str, path: str, body: Any = None, *, idempotent: bool = True) -> Any:
        """One call's parsed JSON answer (see `_send`)."""
        response = self._send(method, path, body, idempotent=idempotent)
        try:
            return response.json()
        except ValueError:
            raise Unavailable(f"{self.identity} answered {method} {path} with a body that is not JSON") from None

    def _send(
        self, method: str, path: str, body: Any = None, *, idempotent: bool = True, stream: bool = False
    ) -> Answer:
        """One call, retried with backoff on 429, 503, `retryable: true` and connection failures.

        A write without `external_ref` is retried only when the endpoint cannot have processed it
        (the connection never opened, or a 429/503 answer), so a retry never writes twice. The whole
        call, retries and waits included, has `self.deadline` seconds; an answer refused for its size
        is not asked for again. With `stream`, NDJSON is asked for first and, when it comes, handed
        back as `Answer.stream` once its head is in (the caller reads its lines, each within
        `self.deadline` of the one before, and closes it); any other answer is read whole.
        """
        content = None if body is None else _encoded(body)
        headers = {"X-Request-Id": uuid.uuid4().hex}
        if stream:
            headers["Accept"] = STREAM_ACCEPT
        deadline = time.monotonic() + self.deadline
        attempt = 0
        while True:
            try:
                response = self._client.request(method, path, content, headers, deadline, stream=stream)
            except DeadlinePassed:
                raise Unavailable(
                    f"no whole answer from {self.identity} to {method} {path} within the deadline of "
                    f"{self.deadline:g} s (set MNEMO_DEADLINE to wait longer)"
                ) from None
            except TooLarge as exc:
                raise Unavailable(f"{self.identity} sent {exc.reason} to {method} {path}; not asked again") from None
            except TransportError as exc:
                if exc.final:  # a host name that does not resolve: asking again within the deadline cannot help
                    raise Unavailable(
                        f"cannot reach {self.identity} ({exc.reason}); not asked again: check the endpoint's host"
                    ) from None
                if (idempotent or not exc.sent) and self._wait_to_retry(attempt, deadline):
                    attempt += 1
                    continue
                raise Unavailable(
                    f"cannot reach {self.identity} ({exc.reason}) after {attempt + 1} attempt(s); is the server up?"
                ) from None
            if response.status_code < 300:
                return response
            if response.status_code == 404 and not path.startswith(_MAY_BE_404):
                # docs/server.md: a 404 is only an unknown atom or invite code, never a feed or a list; so
                # the base URL is wrong (most often its /api/v1 is missing).
                raise NotFound(
                    f"{self.identity} has no {method} {path} (HTTP 404): check the endpoint, a base URL that "
                    "ends in /api/v1 (e.g. http://127.0.0.1:8765/api/v1)"
                )
            problem = error_of(response)
            said = said_retryable(response)
            # The endpoint's own word wins (a 503 that says `retryable: false` is a deadline, not a blip).
            transient = said if said is not None else (problem.retryable or response.status_code in TRANSIENT_STATUS)
            allowed = idempotent or response.status_code in NOT_PROCESSED_STATUS
            if transient and allowed and self._wait_to_retry(attempt, deadline, retry_after(response)):
                attempt += 1
                continue
            if transient and attempt:
                problem.message = f"{problem.message} (after {attempt + 1} attempts)"
                problem.args = (problem.message,)
            raise problem


def _encoded(body: Any) -> bytes:
    """A request body as UTF-8; a lone surrogate, which UTF-8 cannot carry, goes as its JSON escape (`\\ud800`)
    so that the endpoint refuses it naming the field, as it would any other client's."""
    text = dumps(body)
    try:
        return text.encode()
    except UnicodeEncodeError:
        return json.dumps(body, ensure_ascii=True, separators=(",", ":")).encode()
