"""The remote backend's HTTP side (`backends/remote_http.py` on httpcore): kept-alive connections, timeouts, the
deadline and the size bound, proxies, TLS.

Every server here is a real socket on 127.0.0.1 speaking HTTP/1.1 by hand, so the test decides
exactly when a connection closes, when an answer never comes, and what a proxy sees.
"""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui.backends import remote_http
from mnemo_tui.backends.proxies import proxy_for
from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.backends.remote_calls import STREAM_ACCEPT
from mnemo_tui.errors import PayloadTooLarge, Unavailable, ValidationError
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.wire import refusing_port

KEY = "mk_live_" + "5" * 32
ITEM = {
    "atom_id": "00000000-0000-4000-8000-000000000001",
    "content": "x",
    "domain": "general",
    "created_at": "2026-01-01T00:00:00.000000Z",
    "concepts": [],
}
WRITTEN = {"atom_id": ITEM["atom_id"], "stored": True, "superseded": []}


class Request:
    def __init__(self, line: str, headers: dict[str, str], body: bytes, connection: int) -> None:
        self.line = line
        self.headers = headers
        self.body = body
        self.connection = connection


def _read_request(stream: Any) -> tuple[str, dict[str, str], bytes] | None:
    line = stream.readline()
    if not line:
        return None
    headers: dict[str, str] = {}
    while True:
        raw = stream.readline()
        if raw in (b"\r\n", b"\n", b""):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        name, value = name.strip().lower(), value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value  # a repeated one, as HTTP joins it
    body = stream.read(int(headers.get("content-length", "0")))
    return line.decode("latin-1").strip(), headers, body


def answer(status: int, body: Any, *, close: bool = False) -> bytes:
    raw = json.dumps(body).encode()
    head = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(raw)}\r\n"
    return (head + ("Connection: close\r\n" if close else "") + "\r\n").encode() + raw


# handler(request) -> (bytes to send, or None to send nothing and hold the connection; close after)
Handler = Callable[[Request], tuple[bytes | None, bool]]


class RawServer:
    """A loopback HTTP/1.1 server run by hand: every request it read, on which connection it came."""

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.tls = tls
        self.seen: list[Request] = []
        self.connections = 0
        self.closed = 0  # connections this server has closed
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn, self.connections), daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        stream = None
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            stream = conn.makefile("rb")
            while True:
                read = _read_request(stream)
                if read is None:
                    break
                request = Request(*read, connection=number)
                self.seen.append(request)
                out, close = self.handler(request)
                if out is None:
                    self.held.append(conn)  # no answer, ever: the client's read timeout must end it
                    return
                conn.sendall(out)
                if close:
                    break
        except OSError:
            pass
        # The file made from the socket holds it open: closed first, so that the socket's own close sends its
        # FIN before the close is counted (a test that waits for the count must find the connection closed).
        if stream is not None:
            stream.close()
        conn.close()
        self.closed += 1

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        for conn in self.held:
            conn.close()


@contextmanager
def raw_server(handler: Handler, tls: ssl.SSLContext | None = None) -> Iterator[RawServer]:
    server = RawServer(handler, tls)
    try:
        yield server
    finally:
        server.close()


def _pages(request: Request) -> tuple[bytes | None, bool]:
    if request.line.startswith("POST") and "/memory/write" in request.line:
        return answer(200, WRITTEN), False
    return answer(200, {"items": [ITEM], "next_cursor": None}), False


# -- kept-alive connections --------------------------------------------------------------------------------


def test_a_walk_reuses_one_connection() -> None:
    with raw_server(_pages) as server:
        backend = RemoteBackend(f"http://127.0.0.1:{server.port}/api/v1", KEY)
        for _ in range(5):
            assert [e.atom_id for e in backend.recent(RecentQuery()).items] == [ITEM["atom_id"]]
        backend.close()
    assert server.connections == 1 and len(server.seen) == 5
    first = server.seen[0]
    assert first.line == "POST /api/v1/memory/recent HTTP/1.1"
    assert first.headers["x-api-key"] == KEY and first.headers["user-agent"].startswith("mnemo/")
    assert json.loads(first.body)["limit"] == 20


def test_a_connection_the_endpoint_closed_is_opened_again_and_a_write_is_sent_once() -> None:
    # The server closes every connection after its answer without saying so (no `Connection: close`),
    # as a proxy's idle timeout does: the next request must see that before it sends, and open another.
    def once(request: Request) -> tuple[bytes | None, bool]:
        return _pages(request)[0], True

    with raw_server(once) as server:
        sleeps: list[float] = []
        backend = RemoteBackend(f"http://127.0.0.1:{server.port}/api/v1", KEY, sleep=sleeps.append)
        backend.recent(RecentQuery())
        _wait_closed(server, 1)
        assert backend.write(WriteRequest(content="once")).atom_id == ITEM["atom_id"]
        _wait_closed(server, 2)
        backend.recent(RecentQuery())
        backend.close()
    writes = [r for r in server.seen if "/memory/write" in r.line]
    assert len(writes) == 1 and json.loads(writes[0].body)["content"] == "once"
    assert server.connections == 3 and sleeps == []  # one connection a request, no retry


def _wait_closed(server: RawServer, count: int) -> None:
    """Until the server has closed `count` connections (its close reaches a loopback peer as it happens)."""
    for _ in range(1000):  # bounded: 10 s
        if server.closed >= count:
            return
        time.sleep(0.01)
    raise AssertionError("the server never closed the connection")


def test_an_answer_with_connection_close_ends_the_connection() -> None:
    def closing(request: Request) -> tuple[bytes | None, bool]:
        return answer(200, {"items": [], "next_cursor": None}, close=True), True

    with raw_server(closing) as server:
        backend = RemoteBackend(f"http://127.0.0.1:{server.port}/api/v1", KEY)
        for _ in range(3):
            assert backend.recent(RecentQuery()).items == []
        backend.close()
    assert server.connections == 3


# -- what never answers ------------------------------------------------------------------------------------


def test_an_endpoint_that_never_answers_times_out_and_a_write_is_not_sent_twice() -> None:
    with raw_server(lambda request: (None, False)) as server:
        url = f"http://127.0.0.1:{server.port}/api/v1"
        sleeps: list[float] = []
        backend = RemoteBackend(url, KEY, sleep=sleeps.append, read_timeout=0.3)
        with pytest.raises(Unavailable, match=r"timed out\) after 1 attempt"):
            backend.write(WriteRequest(content="maybe stored"))
        _wait_seen(server, 1)
        assert len(server.seen) == 1 and sleeps == []  # sent once ("after 1 attempt"): it may have been stored
        with pytest.raises(Unavailable, match=r"timed out\) after 3 attempt"):
            RemoteBackend(url, KEY, sleep=sleeps.append, read_timeout=0.3, retries=2).recent(RecentQuery())
        _wait_seen(server, 4)
        assert len(server.seen) == 4 and len(sleeps) == 2  # a read is retried


@contextmanager
def dripping_server() -> Iterator[RawServer]:
    """A loopback endpoint that answers 200 with a declared body, then sends it a byte every 0.1 s."""
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    seen = RawServer.__new__(RawServer)
    seen.port, seen.seen = listener.getsockname()[1], []

    def drip() -> None:
        conn, _ = listener.accept()
        with conn:
            read = _read_request(conn.makefile("rb"))
            assert read is not None
            seen.seen.append(Request(*read, connection=1))
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 3000\r\n\r\n")
            for _ in range(3000):  # bounded: 300 s, ended at once by the client's close or the test's end
                if stop.wait(0.1):
                    return
                try:
                    conn.sendall(b" ")
                except OSError:
                    return

    threading.Thread(target=drip, daemon=True).start()
    try:
        yield seen
    finally:
        stop.set()
        listener.close()


def test_an_endpoint_that_drips_its_answer_meets_the_deadline_and_exit_5(cli: Any) -> None:
    with dripping_server() as server:
        env = {"MNEMO_ENDPOINT": f"http://127.0.0.1:{server.port}/api/v1", "MNEMO_API_KEY": KEY, "MNEMO_DEADLINE": "1"}
        result = cli("recent", env=env)
    assert result.code == 5, result.stderr
    assert "no whole answer from http://127.0.0.1:" in result.stderr
    assert "to POST /memory/recent within the deadline of 1 s (set MNEMO_DEADLINE to wait longer)" in result.stderr
    assert "Traceback" not in result.stderr and KEY not in result.stderr
    assert len(server.seen) == 1  # a deadline passed is not asked again


def test_a_deadline_that_is_no_number_of_seconds_is_a_usage_error(cli: Any) -> None:
    env = {"MNEMO_ENDPOINT": "http://127.0.0.1:9/api/v1", "MNEMO_API_KEY": KEY, "MNEMO_DEADLINE": "soon"}
    result = cli("recent", env=env)
    assert result.code == 2 and "MNEMO_DEADLINE is 'soon': it must be a number of seconds above zero" in result.stderr


def _wait_seen(server: RawServer, count: int) -> None:
    """Until the server's threads have read `count` requests (the client may give up before they run)."""
    for _ in range(1000):  # bounded: 10 s
        if len(server.seen) >= count:
            return
        time.sleep(0.01)


def test_a_refused_connection_is_not_sent_so_even_a_write_is_retried() -> None:
    with refusing_port() as sock:
        port = sock.getsockname()[1]
        sleeps: list[float] = []
        backend = RemoteBackend(f"http://127.0.0.1:{port}/api/v1", KEY, sleep=sleeps.append, retries=2)
        with pytest.raises(Unavailable, match=r"connection refused\) after 3 attempt"):
            backend.write(WriteRequest(content="x"))
        backend.close()
    assert len(sleeps) == 2


def test_a_truncated_answer_is_no_answer_and_a_write_is_not_sent_twice() -> None:
    def truncated(request: Request) -> tuple[bytes | None, bool]:
        return answer(200, WRITTEN)[:-3], True

    with raw_server(truncated) as server:
        sleeps: list[float] = []
        backend = RemoteBackend(f"http://127.0.0.1:{server.port}/api/v1", KEY, sleep=sleeps.append)
        with pytest.raises(Unavailable, match=r"the answer was cut short\) after 1 attempt"):
            backend.write(WriteRequest(content="maybe stored"))
        backend.close()
    assert len(server.seen) == 1 and sleeps == []


def test_an_answer_sent_before_the_body_was_read_is_the_answer() -> None:
    # The endpoint refuses the body from its headers (413), reads no more of it and closes: the client's
    # send fails, and the answer waiting for it is what it returns (never "cannot reach").
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    held: list[socket.socket] = []

    def refuse() -> None:
        conn, _ = listener.accept()
        held.append(conn)
        stream = conn.makefile("rb")
        while stream.readline() not in (b"\r\n", b""):
            pass
        refusal = {"code": "PAYLOAD_TOO_LARGE", "message": "request body is over 1048576 bytes", "retryable": False}
        conn.sendall(answer(413, refusal, close=True))
        conn.close()  # as a server does after `Connection: close`: the rest of the body is refused

    threading.Thread(target=refuse, daemon=True).start()
    sleeps: list[float] = []
    backend = RemoteBackend(
        f"http://127.0.0.1:{listener.getsockname()[1]}/api/v1", KEY, sleep=sleeps.append, read_timeout=2
    )
    try:
        with pytest.raises(PayloadTooLarge, match="over 1048576 bytes"):
            backend.write(WriteRequest(content="x" * 20_000_000))
    finally:
        backend.close()
        listener.close()
        for conn in held:
            conn.close()
    assert sleeps == []


@pytest.mark.parametrize(
    "url",
    ["ftp://host/api/v1", "http:///api/v1", "http://host:99999/api/v1", "http://u:p@host/api/v1", "http://h/a?q=1"],
)
def test_an_endpoint_url_it_cannot_use_is_a_validation_error(url: str) -> None:
    with pytest.raises(ValidationError, match="URL"):
        RemoteBackend(url, KEY)


def test_an_answer_declaring_an_impossible_length_is_refused_and_not_asked_again() -> None:
    def liar(request: Request) -> tuple[bytes | None, bool]:
        return b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n{}", True

    with raw_server(liar) as server:
        sleeps: list[float] = []
        backend = RemoteBackend(f"http://127.0.0.1:{server.port}/api/v1", KEY, sleep=sleeps.append)
        with pytest.raises(Unavailable, match=r"an answer over 256 MiB to POST /memory/recent; not asked again"):
            backend.recent(RecentQuery())
        backend.close()
    assert len(server.seen) == 1 and sleeps == []


def test_an_answer_sent_beyond_the_bound_is_refused_as_it_streams_and_not_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No declared length (chunked): the bound is met while the body comes in, not after.
    monkeypatch.setattr(remote_http, "MAX_ANSWER", 1 << 20)

    def endless(request: Request) -> tuple[bytes | None, bool]:
        chunk = b"%x\r\n%s\r\n" % (1 << 16, b" " * (1 << 16))
        return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk * 40 + b"0\r\n\r\n", True

    with raw_server(endless) as server:
        sleeps: list[float] = []
        backend = RemoteBackend(f"http://127.0.0.1:{server.port}/api/v1", KEY, sleep=sleeps.append)
        with pytest.raises(Unavailable, match=r"an answer over 1 MiB to POST /memory/recent; not asked again"):
            backend.recent(RecentQuery())
        backend.close()
    assert len(server.seen) == 1 and sleeps == []


def test_an_endpoint_path_and_host_are_sent_as_the_request_line_spells_them(monkeypatch: pytest.MonkeyPatch) -> None:
    with raw_server(_pages) as server:
        backend = RemoteBackend(f"http://127.0.0.1:{server.port}/mnémo space/api/v1", KEY)
        backend.recent(RecentQuery())
        backend.close()
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.port}")
        through = RemoteBackend("http://bücher.example:8765/api/v1", KEY)
        through.recent(RecentQuery())
        through.close()
    assert server.seen[0].line == "POST /mn%C3%A9mo%20space/api/v1/memory/recent HTTP/1.1"
    assert server.seen[1].line == "POST http://xn--bcher-kva.example:8765/api/v1/memory/recent HTTP/1.1"


def test_a_request_names_its_host_its_body_s_length_and_the_one_encoding_it_reads() -> None:
    # What the transport spells itself (httpcore adds no header of its own): the port only where it is not the
    # scheme's, a body's length, and the bytes as they are (the size bound is on those); a call's own header
    # replaces the client's of the same name, whatever its case.
    with raw_server(_pages) as server:
        backend = RemoteBackend(f"http://127.0.0.1:{server.port}/api/v1", KEY)
        backend.recent(RecentQuery())
        backend.domains()
        assert len(list(backend.walk_pages(RecentQuery()))) == 1  # asked as a stream, answered as one page
        backend.close()
    posted, got, streamed = server.seen
    assert {r.headers["host"] for r in server.seen} == {f"127.0.0.1:{server.port}"}
    assert int(posted.headers["content-length"]) == len(posted.body) > 0 and "content-length" not in got.headers
    assert {r.headers["accept-encoding"] for r in server.seen} == {"identity"}
    assert posted.headers["accept"] == got.headers["accept"] == "application/json"
    assert streamed.headers["accept"] == STREAM_ACCEPT
    assert {r.headers["x-api-key"] for r in server.seen} == {KEY}


@pytest.mark.parametrize("host", ["a..b", "x" * 64 + ".example"])
def test_a_host_that_is_no_host_name_is_a_validation_error(host: str) -> None:
    with pytest.raises(ValidationError, match="not a valid host name"):
        RemoteBackend(f"https://{host}/api/v1", KEY)


def test_credentials_in_an_endpoint_url_are_never_shown() -> None:
    with pytest.raises(ValidationError) as refused:
        RemoteBackend("https://me:hunter2@mnemo.example.com/api/v1", KEY)
    assert "hunter2" not in str(refused.value) and "***@mnemo.example.com" in str(refused.value)


# -- proxies from the environment --------------------------------------------------------------------------


def test_which_proxy_the_environment_names() -> None:
    env = {"HTTPS_PROXY": "http://user:p%40ss@proxy.example:3128", "http_proxy": "proxy.example:8080"}
    https = proxy_for("https", "mnemo.example.com", env)
    assert https is not None and (https.host, https.port) == ("proxy.example", 3128)
    assert https.authorization == "Basic dXNlcjpwQHNz"  # user:p@ss
    plain = proxy_for("http", "mnemo.example.com", env)
    assert plain is not None and (plain.host, plain.port, plain.authorization) == ("proxy.example", 8080, None)
    assert proxy_for("http", "mnemo.example.com", {"ALL_PROXY": "http://p:1"}) is not None
    assert proxy_for("https", "mnemo.example.com", {}) is None
    for loopback in ("127.0.0.1", "127.8.9.1", "::1", "localhost", "api.localhost"):
        assert proxy_for("http", loopback, env) is None
    for no_proxy in ("*", "example.com", ".example.com", "other.org, mnemo.example.com"):
        assert proxy_for("https", "mnemo.example.com", {**env, "NO_PROXY": no_proxy}) is None
    assert proxy_for("https", "mnemo.example.com", {**env, "no_proxy": "ample.com"}) is not None
    # curl's forms: a port (only that port), a scheme in front (ignored), an address range.
    assert proxy_for("http", "internal.corp", {**env, "NO_PROXY": "internal.corp:8765"}, 8765) is None
    assert proxy_for("http", "internal.corp", {**env, "NO_PROXY": "internal.corp:8765"}, 80) is not None
    assert proxy_for("http", "internal.corp", {**env, "NO_PROXY": "http://internal.corp"}) is None
    assert proxy_for("http", "10.1.2.3", {**env, "NO_PROXY": "10.0.0.0/8"}) is None
    assert proxy_for("http", "11.1.2.3", {**env, "NO_PROXY": "10.0.0.0/8"}) is not None
    for bad in ("socks5://p:1080", "https://p:443", "http://:8080", "http://p:notaport"):
        with pytest.raises(ValueError, match="not an http:// proxy"):
            proxy_for("https", "mnemo.example.com", {"HTTPS_PROXY": bad})


def test_a_request_goes_through_the_proxy_the_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    # The proxy (a real socket) answers for the endpoint: a plain-HTTP request through a proxy names the
    # whole URL and carries the proxy's credentials; the endpoint's name is never resolved here.
    with raw_server(_pages) as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://me:secret@127.0.0.1:{proxy.port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        backend = RemoteBackend("http://mnemo.invalid:8765/api/v1", KEY)
        assert [e.atom_id for e in backend.recent(RecentQuery()).items] == [ITEM["atom_id"]]
        backend.close()
    (seen,) = proxy.seen
    assert seen.line == "POST http://mnemo.invalid:8765/api/v1/memory/recent HTTP/1.1"
    assert seen.headers["proxy-authorization"] == "Basic bWU6c2VjcmV0"  # me:secret
    assert seen.headers["x-api-key"] == KEY


def test_a_proxy_that_refuses_the_tunnel_says_so_and_nothing_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(request: Request) -> tuple[bytes | None, bool]:
        return b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n", True

    with raw_server(refuse) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", f"http://me:secret@127.0.0.1:{proxy.port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        sleeps: list[float] = []
        backend = RemoteBackend("https://mnemo.invalid/api/v1", KEY, sleep=sleeps.append, retries=1)
        with pytest.raises(Unavailable, match="the proxy refused the tunnel: 407") as refused:
            backend.write(WriteRequest(content="x"))
    assert "secret" not in str(refused.value) and len(sleeps) == 1  # not sent: a write may be retried
    assert [r.line.rsplit(" ", 1)[0] for r in proxy.seen] == ["CONNECT mnemo.invalid:443"] * 2
    assert proxy.seen[0].headers["proxy-authorization"] == "Basic bWU6c2VjcmV0"
    assert "x-api-key" not in proxy.seen[0].headers  # the key goes only inside the tunnel


def test_a_proxy_that_is_not_http_is_a_validation_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "socks5://127.0.0.1:1080")
    with pytest.raises(
        ValidationError, match="not an http:// proxy, the only kind mnemo uses: fix or unset HTTPS_PROXY"
    ):
        RemoteBackend("https://mnemo.example.com/api/v1", KEY)


# -- TLS ---------------------------------------------------------------------------------------------------


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, made with the openssl command for this test only."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subject = ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    files = ["-keyout", str(key), "-out", str(cert)]
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", *subject, *files],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_tls_is_verified_against_the_trusted_certificates(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = certificate
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    with raw_server(_pages, tls=context) as server:
        url = f"https://127.0.0.1:{server.port}/api/v1"
        untrusted = RemoteBackend(url, KEY, sleep=lambda _s: None, retries=1)
        with pytest.raises(Unavailable, match="TLS certificate not trusted"):
            untrusted.recent(RecentQuery())
        assert server.seen == []  # nothing was sent to an endpoint that could not prove who it is
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        trusted = RemoteBackend(url, KEY)
        assert [e.atom_id for e in trusted.recent(RecentQuery()).items] == [ITEM["atom_id"]]
        trusted.close()
    assert len(server.seen) == 1 and server.seen[0].headers["x-api-key"] == KEY


def test_one_request_id_per_logical_call_the_same_across_its_retries() -> None:
    answers = [answer(503, {"code": "UNAVAILABLE", "message": "busy", "retryable": True}), answer(200, WRITTEN)] * 2

    def busy_then_ok(request: Request) -> tuple[bytes | None, bool]:
        return answers.pop(0), False

    with raw_server(busy_then_ok) as server:
        sleeps: list[float] = []
        backend = RemoteBackend(f"http://127.0.0.1:{server.port}/api/v1", KEY, sleep=sleeps.append)
        backend.write(WriteRequest(content="a", external_ref="r-1"))
        backend.write(WriteRequest(content="b", external_ref="r-2"))
        backend.close()
    ids = [r.headers["x-request-id"] for r in server.seen]
    assert len(ids) == 4 and len(sleeps) == 2
    assert ids[0] == ids[1] != ids[2] == ids[3]
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
