"""Provides the remote backend's HTTP/1.1 transport on the stdlib: one kept-alive connection, timeouts, TLS, proxies.

`http.client` does the protocol (framing, chunked bodies, keep-alive); this module adds what a
client of a REST endpoint needs around it: a base URL, a connect timeout apart from the read
timeout, a kept-alive connection checked before it is reused, TLS verified against the system's
certificates (and certifi's, where installed), an `http://` proxy from the environment, and
failures sorted into "never sent" and "no answer". It replaced httpx, whose request cost ~0.9 ms
of CPU a call here against ~0.25 ms, and whose import took ~250 ms of a remote command's start.
"""

from __future__ import annotations

import binascii
import http.client
import json
import select
import socket
import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from mnemo_tui import TYPE_CHECKING

if TYPE_CHECKING:
    from ipaddress import IPv4Address, IPv6Address

    IPAddress = IPv4Address | IPv6Address

# The largest answer read (a page of 100 entries at the largest content is well under it): a body
# declared or sent beyond it is a transport error, not a memory error.
MAX_ANSWER = 256 << 20
_CHUNK = 1 << 16


class TransportError(Exception):
    """A request that got no answer; `reason` says why in a few words (never a key or a body).

    Attributes:
        sent: False when the connection never opened, so the endpoint cannot have seen the request.
    """

    sent = True

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotSent(TransportError):
    """The connection (or the proxy's tunnel) never opened: nothing of the request left this machine."""

    sent = False


class BadProxy(ValueError):
    """A proxy named by the environment that mnemo cannot use."""


class TooLarge(ValueError):
    """An answer larger than `MAX_ANSWER`."""


class Answer:
    """One HTTP answer, read whole: status, headers (names lower-cased; a repeated one keeps its last value), body."""

    __slots__ = ("content", "headers", "status_code")

    def __init__(self, status_code: int, headers: dict[str, str], content: bytes) -> None:
        self.status_code = status_code
        self.headers = headers
        self.content = content

    def json(self) -> Any:
        """The body as JSON.

        Raises:
            ValueError: the body is not JSON (nested too deep counts as not JSON).
        """
        try:
            return json.loads(self.content)
        except RecursionError:
            raise ValueError("the body is nested too deeply") from None


class Proxy:
    """An `http://` proxy: where to connect, and the `Proxy-Authorization` its URL's credentials make."""

    __slots__ = ("authorization", "host", "port")

    def __init__(self, host: str, port: int, authorization: str | None) -> None:
        self.host = host
        self.port = port
        self.authorization = authorization


def _bypassed(host: str, address: IPAddress | None, port: int, no_proxy: str) -> bool:
    """Whether `NO_PROXY` names the endpoint, as curl reads it: `*`, the host, a domain it is in
    (`example.com`, `.example.com`), either with `:port` (then only that port), an address range
    (`10.0.0.0/8`); a `scheme://` in front of an entry is ignored."""
    import ipaddress

    for raw in no_proxy.replace(" ", "").lower().split(","):
        entry = raw.split("://", 1)[-1].rstrip("/")
        if entry == "*":
            return True
        name, _, wanted = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if wanted and wanted != str(port):
            continue
        name = name.strip("[]").lstrip(".")
        if not name:
            continue
        if address is not None and "/" in name:
            try:
                if address in ipaddress.ip_network(name, strict=False):
                    return True
            except ValueError:
                pass
            continue
        if host == name or host.endswith("." + name):
            return True
    return False


def proxy_for(scheme: str, host: str, environ: Mapping[str, str], port: int | None = None) -> Proxy | None:
    """The proxy the environment names for an endpoint (`<scheme>_proxy`, then `all_proxy`, each in either case).

    A loopback endpoint is never proxied (a proxy's loopback is not this machine's), nor one `NO_PROXY` names.

    Raises:
        BadProxy: a proxy URL that is not `http://host[:port]`.
    """
    import ipaddress

    host = host.lower()
    port = port or (443 if scheme == "https" else 80)
    try:
        address: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    loopback = host == "localhost" or host.endswith(".localhost") or (address is not None and address.is_loopback)
    if loopback or _bypassed(host, address, port, environ.get("no_proxy") or environ.get("NO_PROXY") or ""):
        return None
    url = ""
    for name in (f"{scheme}_proxy", "all_proxy"):
        url = environ.get(name) or environ.get(name.upper()) or ""
        if url:
            break
    if not url:
        return None
    parts = urlsplit(url if "://" in url else "http://" + url)
    try:
        port = parts.port or 80
    except ValueError:
        port = 0
    if parts.scheme != "http" or not parts.hostname or not port:
        shown = f"{parts.scheme}://{parts.hostname or ''}"
        raise BadProxy(f"the proxy {shown} from the environment is not an http:// proxy, the only kind mnemo uses")
    authorization = None
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        authorization = "Basic " + binascii.b2a_base64(pair, newline=False).decode()
    return Proxy(parts.hostname, port, authorization)


def _tls() -> ssl.SSLContext:
    """Certificates verified, host names checked: the system's store (and `SSL_CERT_FILE`), plus certifi's.

    One per transport, made when it first opens a TLS connection (the environment is read then)."""
    context = ssl.create_default_context()
    try:
        import certifi
    except ImportError:  # pragma: no cover - certifi is a dependency; the system's store then stands alone
        return context
    context.load_verify_locations(certifi.where())
    return context


def _stale(sock: socket.socket) -> bool:
    """Whether a kept-alive connection was closed by the other end (or holds bytes nobody asked for)."""
    try:
        if hasattr(select, "poll"):  # no limit on the descriptor's number, unlike select()
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return bool(poller.poll(0))
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate not trusted: {exc.verify_message}"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, socket.gaierror):
        return "host name not found"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if type(exc) is OSError and str(exc).startswith("Tunnel connection failed"):
        return f"the proxy refused the tunnel: {str(exc).split(':', 1)[1].strip()}"  # its status line, no secret
    if isinstance(exc, TooLarge):
        return str(exc)
    if isinstance(exc, ValueError) and not isinstance(exc, UnicodeError):
        return "a malformed answer"  # e.g. a chunk size that is not a number
    return type(exc).__name__


def _answer(conn: http.client.HTTPConnection) -> Answer:
    """The whole answer, read in chunks up to MAX_ANSWER (http.client would allocate a declared length at once).

    Raises:
        OSError, http.client.HTTPException, ValueError: the answer did not come whole, or was malformed.
        TooLarge: it was larger than MAX_ANSWER.
    """
    response = conn.getresponse()
    chunks: list[bytes] = []
    size = 0
    while chunk := response.read(_CHUNK):
        size += len(chunk)
        if size > MAX_ANSWER:
            raise TooLarge(f"an answer over {MAX_ANSWER >> 20} MiB")
        chunks.append(chunk)
    if response.length:  # read(amt) ends quietly where the body stopped short of its declared length
        raise http.client.IncompleteRead(b"", response.length)
    return Answer(response.status, {name.lower(): value for name, value in response.getheaders()}, b"".join(chunks))


def _early_answer(conn: http.client.HTTPConnection) -> Answer | None:
    """The answer an endpoint sent while the request was still being sent, if one is waiting to be read."""
    if conn.sock is None or not _stale(conn.sock):
        return None
    try:
        return _answer(conn)
    except (OSError, ValueError, http.client.HTTPException):
        return None


class Transport:
    """Requests to one endpoint over one kept-alive connection (opened again when the endpoint closed it).

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
        self.https = parts.scheme == "https"
        # The host as DNS and the request line spell it: IDNA (`bücher.example` is `xn--bcher-kva.example`),
        # an empty or over-long label refused here, not at connect; an IPv6 address (urlsplit drops its
        # brackets) as it is.
        try:
            self.host = parts.hostname if ":" in parts.hostname else parts.hostname.encode("idna").decode("ascii")
        except UnicodeError:
            raise ValueError(f"the host {parts.hostname!r} is not a valid host name") from None
        self.port = parts.port or (443 if self.https else 80)  # a port that is not a number raises ValueError
        # Percent-encoded as httpx did (what is already %-encoded stays as it is).
        self.base_path = quote(parts.path.rstrip("/"), safe="/%!$&'()*+,;=:@~")
        self.headers = dict(headers)
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.proxy = proxy_for(parts.scheme, self.host, environ, self.port)
        # Through a proxy, a plain-HTTP request names the whole URL; a TLS one goes through a tunnel.
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self._origin = f"http://{shown}:{self.port}" if self.proxy is not None and not self.https else ""
        if self.proxy is not None and not self.https and self.proxy.authorization:
            self.headers["Proxy-Authorization"] = self.proxy.authorization
        self._conn: http.client.HTTPConnection | None = None
        self._context: ssl.SSLContext | None = None

    def _open(self) -> http.client.HTTPConnection:
        proxy = self.proxy
        host, port = (proxy.host, proxy.port) if proxy is not None else (self.host, self.port)
        conn: http.client.HTTPConnection
        try:
            if self.https:
                if self._context is None:
                    self._context = _tls()
                conn = http.client.HTTPSConnection(host, port, timeout=self.connect_timeout, context=self._context)
                if proxy is not None:
                    tunnel = {"Proxy-Authorization": proxy.authorization} if proxy.authorization else None
                    conn.set_tunnel(self.host, self.port, headers=tunnel)
            else:
                conn = http.client.HTTPConnection(host, port, timeout=self.connect_timeout)
        except (OSError, ValueError) as exc:  # the TLS certificates could not be loaded
            raise NotSent(_reason(exc)) from None
        try:
            conn.connect()
        except (OSError, ValueError, http.client.HTTPException) as exc:  # UnicodeError is a ValueError
            conn.close()
            raise NotSent(_reason(exc)) from None
        assert conn.sock is not None
        conn.sock.settimeout(self.read_timeout)
        return conn

    def request(self, method: str, path: str, content: bytes | None, headers: Mapping[str, str]) -> Answer:
        """One request and its whole answer.

        Raises:
            NotSent: the connection could not be opened.
            TransportError: the request was (or may have been) sent and no whole answer came back.
        """
        conn = self._conn
        if conn is not None and (conn.sock is None or _stale(conn.sock)):
            conn.close()
            conn = self._conn = None
        if conn is None:
            conn = self._conn = self._open()
        target = self._origin + self.base_path + path
        try:
            conn.request(method, target, body=content, headers={**self.headers, **headers})
        except OSError as exc:
            # An endpoint may answer before it has read a body it refuses (a 413) and stop reading it:
            # that answer, when it came, is the one to return, not the failure to send the rest.
            early = _early_answer(conn)
            self.close()
            if early is None:
                raise TransportError(_reason(exc)) from None
            return early
        except (ValueError, http.client.HTTPException) as exc:  # a header http.client refuses to send
            self.close()
            raise TransportError(f"the request could not be sent ({type(exc).__name__})") from None
        try:
            answer = _answer(conn)
        except (OSError, ValueError, http.client.HTTPException) as exc:
            self.close()
            raise TransportError(_reason(exc)) from None
        if conn.sock is None:  # the answer said `Connection: close`: http.client closed the connection
            self.close()
        return answer

    def close(self) -> None:
        """Close the connection (the next request opens another)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
