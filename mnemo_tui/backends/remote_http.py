"""Provides the remote backend's HTTP side on httpcore: one kept-alive pool, our TLS and proxy, a deadline, bounded answers.

httpcore (httpx's own transport, under its public API) does the protocol (framing, keep-alive, a pooled
connection checked before reuse, the proxy's tunnel); httpx's layer above it is not loaded: it imports
its command line (click, rich, pygments) with it, a tenth of a second of every remote command's start.
This module adds TLS against the system's store plus certifi's (one `ssl.SSLContext`), the proxy chosen
by our `NO_PROXY` rule (`backends/proxies.py`), the request's headers (`Host`, `Content-Length`), an
overall deadline per request and a bound on an answer's size, both checked while the body streams in,
and failures sorted into "never sent" and "no answer". It also says what an answer's status means to
mnemo (`error_of`), so `remote.py` keeps only the calls and the retries.
"""

from __future__ import annotations

import json
import math
import re
import socket
import ssl
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import httpcore

from mnemo_tui.backends.proxies import proxy_for
from mnemo_tui.errors import (
    BY_CODE,
    AuthError,
    Conflict,
    FateUnknown,
    Forbidden,
    MnemoError,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    Unavailable,
    ValidationError,
)

if TYPE_CHECKING:
    import httpx

# The largest answer read (a page of 100 entries at the largest content is well under it): a body
# declared or sent beyond it is refused, not a memory error, and not fetched again.
MAX_ANSWER = 256 << 20
NDJSON = "application/x-ndjson"
# What a refused key is told to do (`mnemo login` itself says something else: cmd_login._check_key).
KEY_ADVICE = " (check MNEMO_API_KEY, or run `mnemo login`)"


class TransportError(Exception):
    """A request that got no answer; `reason` says why in a few words (never a key or a body).

    Attributes:
        sent: False when the connection never opened, so the endpoint cannot have seen the request.
        final: True when asking again cannot help (the deadline passed, the answer is too large).
    """

    sent = True
    final = False

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotSent(TransportError):
    """The connection (or the proxy's tunnel) never opened: nothing of the request left this machine."""

    sent = False


class NoSuchHost(NotSent):
    """The endpoint's host name does not resolve (the resolver says no such name, not "try again"): a typo
    or a name that is gone, which asking again within the deadline does not fix."""

    final = True


# The resolver's answers that mean "no such name" (a DNS server that cannot be reached is EAI_AGAIN: retried).
_NO_SUCH_NAME = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}


class DeadlinePassed(TransportError):
    """The request's overall deadline passed before its whole answer came."""

    final = True


class TooLarge(TransportError):
    """An answer declared or sent beyond `MAX_ANSWER`."""

    final = True


class Answer:
    """One HTTP answer, read whole: status, headers (names lower-cased; a repeated one keeps its last value), body;
    or, for a streamed one, its `stream` instead of a body (see `Http.request`)."""

    __slots__ = ("content", "headers", "status_code", "stream")

    def __init__(self, status_code: int, headers: dict[str, str], content: bytes, stream: Stream | None = None) -> None:
        self.status_code = status_code
        self.headers = headers
        self.content = content
        self.stream = stream

    def json(self) -> Any:
        """The body as JSON.

        Raises:
            ValueError: the body is not JSON (nested too deep counts as not JSON).
        """
        try:
            return json.loads(self.content)
        except RecursionError:
            raise ValueError("the body is nested too deeply") from None


def _tls() -> ssl.SSLContext:
    """Certificates verified, host names checked: the system's store (and `SSL_CERT_FILE`/`SSL_CERT_DIR`), plus certifi's."""
    context = ssl.create_default_context()
    try:
        import certifi
    except ImportError:  # pragma: no cover - certifi comes with httpcore; the system's store then stands alone
        return context
    context.load_verify_locations(certifi.where())
    return context


def _root(exc: BaseException) -> BaseException:
    """The first cause of an httpcore error that is not itself httpcore's (the OSError underneath)."""
    seen = exc
    for _ in range(8):  # httpcore's error, then the socket's or the TLS library's
        cause = seen.__cause__ or seen.__context__
        if cause is None:
            break
        seen = cause
        if not type(seen).__module__.startswith(("httpx", "httpcore")):
            break
    return seen


# Every error httpcore raises for a request (it has no one base class); what httpx would raise in their stead.
_HTTP_ERRORS = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.ProxyError,
    httpcore.UnsupportedProtocol,
)
HttpError = (
    httpcore.TimeoutException
    | httpcore.NetworkError
    | httpcore.ProtocolError
    | httpcore.ProxyError
    | httpcore.UnsupportedProtocol
)


def _reason(exc: HttpError) -> str:
    """A failure in a few words: never the endpoint's bytes, a key or a body."""
    if isinstance(exc, httpcore.ProxyError):
        status = str(exc).split(" ", 1)[0]
        shown = str(exc) if status.isdigit() and str(exc).isprintable() and len(str(exc)) < 80 else "no tunnel"
        return f"the proxy refused the tunnel: {shown}"  # its status line, which holds no secret
    if isinstance(exc, httpcore.TimeoutException):
        return "timed out"
    if isinstance(exc, httpcore.RemoteProtocolError):
        said = str(exc)
        if "without sending a response" in said:
            return "the connection closed without an answer"
        return "the answer was cut short" if "peer closed" in said or "incomplete" in said else "a malformed answer"
    if isinstance(exc, httpcore.LocalProtocolError):
        return "the request could not be sent (LocalProtocolError)"
    root = _root(exc)
    if isinstance(root, ssl.SSLCertVerificationError):
        return f"TLS certificate not trusted: {root.verify_message}"
    if isinstance(root, ssl.SSLError):
        return f"TLS failed ({root.reason or type(root).__name__})"
    if isinstance(root, ConnectionRefusedError):
        return "connection refused"
    if isinstance(root, socket.gaierror):
        return "host name not found"
    if isinstance(root, ConnectionResetError):
        return "connection reset"
    return type(exc).__name__


def _failure(exc: HttpError, deadline: float) -> TransportError:
    """What an httpcore error means to mnemo: never sent, past the deadline, or sent and no answer."""
    if isinstance(exc, (httpcore.ConnectError, httpcore.ConnectTimeout, httpcore.PoolTimeout, httpcore.ProxyError)):
        root = _root(exc)
        if isinstance(root, socket.gaierror) and root.errno in _NO_SUCH_NAME:
            return NoSuchHost(_reason(exc))
        return NotSent(_reason(exc))
    if isinstance(exc, httpcore.TimeoutException) and time.monotonic() >= deadline:
        return DeadlinePassed("the deadline passed")
    return TransportError(_reason(exc))  # ReadError, WriteError, RemoteProtocolError...


class Http:
    """Requests to one endpoint through one kept-alive httpcore pool (a `ConnectionPool`, or an `HTTPProxy`).

    Args:
        base_url: `http(s)://host[:port][/path]`; every request's path is appended to it.
        headers: sent with every request.
        connect_timeout: seconds to open the connection (and a proxy's tunnel).
        read_timeout: seconds any one send or receive may wait.
        environ: where proxies are named (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY`).

    Raises:
        ValueError: a URL that is not `http(s)://host...`, with credentials in it, or a bad proxy.
    """

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        *,
        connect_timeout: float,
        read_timeout: float,
        environ: Mapping[str, str],
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("not an http:// or https:// URL with a host")
        if parts.username is not None or parts.password is not None:
            raise ValueError("credentials do not belong in the endpoint URL (the key is sent as a header)")
        if parts.query or parts.fragment:
            raise ValueError("an endpoint URL has no query or fragment")
        https = parts.scheme == "https"
        # The host as DNS spells it (`bücher.example` is `xn--bcher-kva.example`), an empty or over-long
        # label refused here, not at connect; an IPv6 address (urlsplit drops its brackets) as it is.
        try:
            host = parts.hostname if ":" in parts.hostname else parts.hostname.encode("idna").decode("ascii")
        except UnicodeError:
            raise ValueError(f"the host {parts.hostname!r} is not a valid host name") from None
        port = parts.port or (443 if https else 80)  # a port that is not a number raises ValueError
        shown = f"[{host}]" if ":" in host else host
        self._path = _quoted(parts.path.rstrip("/"))
        self.base = f"{parts.scheme}://{shown}:{port}{self._path}"
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        default = port == (443 if https else 80)
        # The URL's parts as the request line spells them (the port left out where it is the scheme's own).
        self._origin = (parts.scheme.encode(), host.encode("ascii"), None if default else port)
        self._headers = {
            name.lower(): (name.encode("ascii"), value.encode("ascii"))
            for name, value in {
                "Host": shown if default else f"{shown}:{port}",
                **headers,
                "Accept-Encoding": "identity",  # the size bound is on the bytes that come
            }.items()
        }
        tls = _tls() if https else None
        # httpx's own limits: up to 20 connections kept alive, each at most 5 s idle.
        limits: dict[str, Any] = {"max_connections": 100, "max_keepalive_connections": 20, "keepalive_expiry": 5.0}
        chosen = proxy_for(parts.scheme, host, environ, port)
        self._pool: httpcore.ConnectionPool | httpcore.HTTPProxy
        if chosen is None:
            self._pool = httpcore.ConnectionPool(ssl_context=tls, **limits)
        else:
            auth = [(b"Proxy-Authorization", chosen.authorization.encode("ascii"))] if chosen.authorization else None
            self._pool = httpcore.HTTPProxy(
                httpcore.URL(scheme=b"http", host=chosen.host.encode("ascii"), port=chosen.port, target=b"/"),
                proxy_headers=auth,
                ssl_context=tls,
                **limits,
            )

    def request(
        self,
        method: str,
        path: str,
        content: bytes | None,
        headers: Mapping[str, str],
        deadline: float,
        *,
        stream: bool = False,
    ) -> Answer:
        """One request and its whole answer, by `deadline` (a `time.monotonic()` instant).

        `stream`: an NDJSON answer (2xx) is not read whole but handed back as `Answer.stream` (the
        caller reads its lines and closes it); any other answer is read whole as always.

        Raises:
            NotSent: the connection could not be opened.
            DeadlinePassed: the deadline passed before the whole answer came.
            TooLarge: the answer was declared or sent beyond MAX_ANSWER.
            TransportError: the request was (or may have been) sent and no whole answer came back.
        """
        answer = self.open_stream(method, path, content, headers, deadline)
        if stream and answer.status_code < 300 and answer.headers.get("content-type", "").startswith(NDJSON):
            return Answer(answer.status_code, answer.headers, b"", answer)
        with answer:
            return answer.read(deadline)

    def open_stream(
        self,
        method: str,
        path: str,
        content: bytes | None,
        headers: Mapping[str, str],
        deadline: float,
        *,
        idle: float | None = None,
    ) -> Stream:
        """A request sent and its answer's status and headers in, its body left to read as it comes: the one
        way every request goes out (`request` reads the body whole, or hands an NDJSON one back).

        Each wait is bounded by what is left of `deadline`, a read's by the read timeout too. With `idle`
        (a push follow), a read's wait (for the headers, then for any byte of the body) is bounded by
        `idle` alone, and a timeout is never the deadline passing: a quiet stream is the caller's to ask
        again, within its own deadline.

        Raises:
            NotSent: the connection could not be opened.
            DeadlinePassed: the deadline passed before the answer's headers came (with `idle`: before
                the request was sent).
            TransportError: the request was (or may have been) sent and no answer came.
        """
        left = deadline - time.monotonic()
        if left <= 0:
            raise DeadlinePassed("the deadline passed")
        opening, wait = min(self.connect_timeout, left), min(self.read_timeout, left)
        timeout = {"connect": opening, "pool": opening, "write": wait, "read": wait if idle is None else idle}
        sent = dict(self._headers)
        for name, value in headers.items():  # the request's own headers replace the client's of the same name
            sent[name.lower()] = (name.encode("ascii"), value.encode("ascii"))
        if content is not None:
            sent["content-length"] = (b"Content-Length", str(len(content)).encode())
        scheme, host, port = self._origin
        url = httpcore.URL(scheme=scheme, host=host, port=port, target=_quoted(self._path + path).encode("ascii"))
        request = httpcore.Request(
            method, url, headers=list(sent.values()), content=content, extensions={"timeout": timeout}
        )
        try:
            return Stream(self._pool.handle_request(request))
        except _HTTP_ERRORS as exc:
            raise _failure(exc, deadline if idle is None else math.inf) from None

    def close(self) -> None:
        """Close the pool and its connections."""
        self._pool.close()


def _quoted(path: str) -> str:
    """A request target's path (and query) %-encoded as a request line spells it; what is already encoded stays."""
    return quote(path, safe="/%!$&'()*+,;=:@~?")


class Stream:
    """One answer being read as it comes: `status_code`, `headers` (as `Answer`'s), then `lines()` or `read()`.

    `abort()` may be called from any thread: it shuts the connection's socket down, so a read waiting
    on it in another thread returns at once (a closed socket alone would leave it waiting). Close it
    when done (a `with` block does).
    """

    def __init__(self, response: httpcore.Response) -> None:
        self._response = response
        self.status_code = response.status
        self.headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in response.headers}
        self.aborted = False

    def lines(
        self, bound: int | None = None, *, cr: bool = False, event: bool = False, seconds: float = math.inf
    ) -> Iterator[bytes]:
        """The body's lines as they come, without their ends: `\\n` ends one, and with `cr` also `\\r\\n` or `\\r`
        (server-sent events). Never more than `bound` bytes (MAX_ANSWER) are held (never one unbounded line
        in memory): a line beyond it raises TooLarge, or with `event`, the lines of one event (up to a blank
        line, their ends counted). Each line comes within `seconds` of the one before, any one read within
        the request's read timeout (the stream's idle deadline).

        Raises:
            DeadlinePassed: a line not whole within `seconds`.
            TooLarge: a line (an event) beyond the bound.
            TransportError: the stream broke, or ended within a line (asking again may help).
        """
        bound = MAX_ANSWER if bound is None else bound
        too_large = f"{'an event' if event else 'a line'} over {bound >> 20} MiB"
        parts: list[bytes | memoryview] = []  # the line read so far, `size` bytes (views: copied once, joined)
        size = spent = 0  # `spent`: an event's lines already read, with their ends
        after_cr = False  # the last chunk ended in `\r`: a `\n` opening the next one belongs to it
        due = time.monotonic() + seconds
        try:
            for chunk in self._response.iter_stream():
                if time.monotonic() > due:
                    raise DeadlinePassed("the deadline passed")
                start = 1 if after_cr and chunk.startswith(b"\n") else 0
                after_cr = False
                view = memoryview(chunk)
                while True:
                    end = chunk.find(b"\n", start)
                    if cr and (r := chunk.find(b"\r", start, len(chunk) if end < 0 else end)) >= 0:
                        end = r
                    if end < 0:
                        break
                    length = size + end - start
                    if length and spent + length + event > bound:
                        raise TooLarge(too_large)
                    if parts:
                        parts.append(view[start:end])
                        line = b"".join(parts)
                        parts, size = [], 0
                    else:
                        line = chunk[start:end]
                    spent = spent + length + 1 if event and length else 0
                    yield line
                    due = time.monotonic() + seconds
                    start = end + 1
                    if chunk[end] == 0x0D:  # `\r\n` is one end
                        after_cr = start == len(chunk)
                        start += chunk.startswith(b"\n", start)
                if start < len(chunk):
                    parts.append(view[start:] if start else chunk)
                    size += len(chunk) - start
                    if spent + size > bound:
                        raise TooLarge(too_large)
        except _HTTP_ERRORS as exc:
            raise _failure(exc, due) from None
        if parts:
            raise TransportError("the stream ended within a line")

    def event_lines(self, bound: int) -> httpx.Response:
        """The lines of server-sent events (bounded by event) as one more response's body, for httpx-sse's decoder
        (which reads an `httpx.Response`: httpx is imported by a push follow only, never to send or read)."""
        import httpx

        bounded = (line + b"\n" for line in self.lines(bound, cr=True, event=True))
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=bounded)

    def read(self, deadline: float = math.inf, limit: int | None = None) -> Answer:
        """The whole body as an `Answer`, by `deadline` and within `limit` bytes (MAX_ANSWER), both checked as it comes.

        Raises:
            DeadlinePassed, TooLarge, or TransportError: the connection failed while it was read.
        """
        limit = MAX_ANSWER if limit is None else limit
        declared = self.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise TooLarge(f"an answer over {limit >> 20} MiB")
        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in self._response.iter_stream():
                size += len(chunk)
                if size > limit:
                    raise TooLarge(f"an answer over {limit >> 20} MiB")
                if time.monotonic() > deadline:
                    raise DeadlinePassed("the deadline passed")
                chunks.append(chunk)
        except _HTTP_ERRORS as exc:
            raise _failure(exc, deadline) from None
        return Answer(self.status_code, self.headers, b"".join(chunks))

    def abort(self) -> None:
        """End the stream from any thread: its socket is shut down (a read waiting on it returns)."""
        self.aborted = True
        network = self._response.extensions.get("network_stream")
        sock = network.get_extra_info("socket") if network is not None else None
        if isinstance(sock, socket.socket):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed or reset: no read can be waiting on it

    def close(self) -> None:
        """Release the connection (from the thread that reads it)."""
        try:
            self._response.close()
        except (*_HTTP_ERRORS, OSError):
            pass  # a connection already broken is dropped by the pool all the same

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_BY_STATUS: dict[int, type[MnemoError]] = {
    400: ValidationError,
    401: AuthError,
    403: Forbidden,
    404: NotFound,
    408: Unavailable,  # the server gave up waiting for the body: not a usage error
    409: Conflict,
    413: PayloadTooLarge,
    422: ValidationError,
    429: RateLimited,
    503: Unavailable,
}
TRANSIENT_STATUS = frozenset({429, 502, 503, 504})
NOT_PROCESSED_STATUS = frozenset({429, 503})


def error_of(response: Answer) -> MnemoError:
    """The project's error for a non-2xx answer: the flat envelope, `{"detail": ...}`, or a 422 list."""
    status = response.status_code
    cls = _BY_STATUS.get(status) or (Unavailable if status >= 500 else ValidationError)
    try:
        body = response.json()
    except ValueError:
        body = None
    message = f"the endpoint answered HTTP {status}"
    details: dict[str, Any] | None = None
    retryable: bool | None = None
    if isinstance(body, dict):
        code = body.get("code")
        if status not in _BY_STATUS and isinstance(code, str) and code in BY_CODE:
            cls = BY_CODE[code]
        detail = body.get("detail")
        if isinstance(body.get("message"), str) and body["message"]:
            message = body["message"]
        elif isinstance(detail, str) and detail:
            message = detail
        elif isinstance(detail, list) and detail:
            parts = []
            for problem in detail[:3]:
                if isinstance(problem, dict):
                    loc = [str(p) for p in problem.get("loc") or [] if p != "body"]
                    parts.append(f"{'.'.join(loc) or 'body'}: {problem.get('msg', 'invalid')}")
            message = "; ".join(parts) or message
        if isinstance(body.get("details"), dict):
            details = body["details"]
        if isinstance(body.get("retryable"), bool):
            retryable = body["retryable"]
    if cls is AuthError:
        message += KEY_ADVICE
    if status >= 500 and (rid := request_id_of(response, body)) is not None:
        message += f" (request id {rid})"  # what the server's log line holds: a user's report leads to it
    if cls is Unavailable and details is not None and details.get("reason") == "commit_unknown":
        cls = FateUnknown  # the write may be stored: its caller must not send it again blindly
    exc = cls(message, details=details)
    if retryable is not None:
        exc.retryable = retryable
    return exc


_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,128}")


def request_id_of(response: Answer, body: Any) -> str | None:
    """The request's id as the server names it (the envelope's `requestId`, else `X-Request-Id`), when it is a
    plain token (the server's words reach a terminal)."""
    rid = body.get("requestId") if isinstance(body, dict) else None
    if not isinstance(rid, str):
        rid = response.headers.get("x-request-id")
    return rid if isinstance(rid, str) and _REQUEST_ID.fullmatch(rid) else None


def said_retryable(response: Answer) -> bool | None:
    """The envelope's `retryable`, when the answer says it."""
    try:
        body = response.json()
    except ValueError:
        return None
    value = body.get("retryable") if isinstance(body, dict) else None
    return value if isinstance(value, bool) else None


RETRY_AFTER_CEILING = 86_400.0  # the longest `Retry-After` read, in seconds: any wait past it is this one


def retry_after(response: Answer) -> float | None:
    """The answer's `Retry-After` in seconds (a number or an HTTP date), when it has one that means a wait: a
    finite number from 0 to a day. NaN, a negative number and a date that does not parse (or overflows) are
    absent, so the backoff applies; an infinity, `1e309` or a date years ahead is a day, which the retry
    policy (`max_wait`, the call's deadline) bounds again: no header makes the client wait past its own."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        from email.utils import parsedate_to_datetime  # ~10 ms of imports (calendar, locale): for a date only

        try:
            seconds = max(0.0, parsedate_to_datetime(value).timestamp() - time.time())  # a past date: now
        except (TypeError, ValueError, OverflowError):  # OverflowError: a year past C's integers
            return None
    if not seconds >= 0.0:  # NaN compares false: it is no wait
        return None
    return min(seconds, RETRY_AFTER_CEILING)
