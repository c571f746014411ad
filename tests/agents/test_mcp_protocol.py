"""`mnemo mcp` over raw stdio lines, as a hostile or careless client writes them: an answer for every request that
carries an id (-32700 for a line that is not strict JSON, -32600 for an invalid request), ping and cancellation
while a call waits on the backend, stdin closed mid-call, and a fuzz of lines after which the server still answers.

The calls that wait go to a real `mnemo serve` through a loopback proxy that holds the server's answers until the
test lets them go, so "the call is waiting on the backend" is a condition the test sees, never a guess of time.
"""

from __future__ import annotations

import itertools
import json
import queue
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.mcp_client import MNEMO, WAIT, HoldingProxy, server_env
from tests.support.serve import start_serve

HELLO = {
    "jsonrpc": "2.0",
    "id": "hello",
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
IDS = itertools.count(1000)


class Raw:
    """One `mnemo mcp` process spoken to in raw lines; its answers and its stderr collected by reader threads."""

    def __init__(self, home: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [MNEMO, *args, "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=server_env(home, "alice") | (env or {}),
        )
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.by_id: dict[object, list[dict[str, Any]]] = {}
        self.unidentified: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self.stderr_grew = threading.Condition()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.inbox.put(json.loads(line))  # stdout is the protocol's: every line is strict JSON
        self.inbox.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self.stderr_grew:
                self.stderr.append(line.decode("utf-8", "replace"))
                self.stderr_grew.notify_all()

    def send(self, message: object) -> None:
        """One line: a message as JSON, or str/bytes exactly as given."""
        if isinstance(message, bytes):
            data = message
        elif isinstance(message, str):
            data = message.encode("utf-8", "surrogatepass")
        else:
            data = json.dumps(message).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def _next(self) -> dict[str, Any]:
        try:
            message = self.inbox.get(timeout=WAIT)
        except queue.Empty:
            raise AssertionError(f"no message in {WAIT} s; stderr: {''.join(self.stderr)}") from None
        assert message is not None, "stdout closed: " + "".join(self.stderr)
        if "id" in message and message["id"] is not None:
            self.by_id.setdefault(message["id"], []).append(message)
        else:
            self.unidentified.append(message)
        return message

    def answer(self, request_id: object) -> dict[str, Any]:
        """The answer to `request_id` (messages for other ids are kept)."""
        while request_id not in self.by_id:
            self._next()
        return self.by_id[request_id][0]

    def unidentified_answer(self) -> dict[str, Any]:
        """The next answer with id null (a line the server could not take an id from)."""
        seen = len(self.unidentified)
        while len(self.unidentified) == seen:
            self._next()
        return self.unidentified[seen]

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        request_id = next(IDS)
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, **({"params": params} if params else {})})
        return self.answer(request_id)

    def initialize(self) -> Raw:
        self.send(HELLO)
        assert "result" in self.answer("hello")
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    def wait_stderr(self, text: str) -> str:
        with self.stderr_grew:
            assert self.stderr_grew.wait_for(lambda: text in "".join(self.stderr), timeout=WAIT), self.stderr
        return "".join(self.stderr)

    def close(self) -> int:
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        return self.proc.wait(timeout=WAIT)


def call(request_id: int, tool: str, **arguments: Any) -> dict[str, Any]:
    params = {"name": tool, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[Raw]:
    server = Raw(tmp_path, "--store", str(tmp_path / "store.db")).initialize()
    yield server
    assert server.close() == 0


# -- an answer for every request that carries an id ------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "this is not json",
        '{"jsonrpc": "2.0", "id": 5, "method": "ping"',
        '{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "memory_feedback", '
        '"arguments": {"atom_ids": ["a"], "outcome": NaN}}}',
        '{"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"x": Infinity}}',
        '{"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"x": -Infinity}}',
    ],
)
def test_a_line_that_is_not_strict_json_is_a_parse_error_and_the_server_goes_on(raw: Raw, line: str) -> None:
    raw.send(line)
    error = raw.unidentified_answer()
    assert error["id"] is None and error["error"]["code"] == -32700
    assert 5 not in raw.by_id  # the id of a line that is not JSON cannot be trusted: it is not answered under it
    assert raw.request("ping")["result"] == {}


def test_invalid_requests_are_refused_under_their_id(raw: Raw) -> None:
    raw.send({"jsonrpc": "1.0", "id": 7, "method": "ping"})
    raw.send({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": "not an object"})
    raw.send({"jsonrpc": "2.0", "id": "nine", "method": 9})
    raw.send('{"jsonrpc": "2.0", "id": 12, "method": "ping", "params": {"x": ' + "[" * 300 + "]" * 300 + "}}")
    for request_id in (7, 8, "nine", 12):  # 12: JSON, but nested deeper than the SDK reads
        assert raw.answer(request_id)["error"]["code"] == -32600
    # an id MCP does not accept (a fraction, a bool, null) cannot be answered under it: id null
    for odd in (1.5, True, None):
        raw.send({"jsonrpc": "2.0", "id": odd, "method": "ping"})
        error = raw.unidentified_answer()
        assert error["error"]["code"] == -32600 and "id" in error["error"]["message"]
    # a batch: each request in it refused under its own id; an empty one, or a bare value, once with id null
    raw.send([{"jsonrpc": "2.0", "id": 10, "method": "ping"}, {"jsonrpc": "2.0", "id": 11, "method": "ping"}])
    assert raw.answer(10)["error"]["code"] == raw.answer(11)["error"]["code"] == -32600
    assert "batches" in raw.answer(10)["error"]["message"]
    for value in ([], 5, '"text"', "{}"):
        raw.send(value if isinstance(value, str) else json.dumps(value))
        assert raw.unidentified_answer()["error"]["code"] == -32600
    assert raw.request("ping")["result"] == {}


def test_a_lone_surrogate_and_invalid_utf8_are_replaced_and_the_call_is_answered(raw: Raw) -> None:
    raw.send(
        '{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"memory_write","arguments":'
        '{"content":"lone \\ud800 here","domain":"odd"}}}'
    )
    assert raw.answer(20)["result"]["isError"] is False
    raw.send(
        b'{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"memory_write","arguments":'
        b'{"content":"bad \xff\xfe bytes","domain":"odd"}}}'
    )
    assert raw.answer(21)["result"]["isError"] is False
    page = raw.request("tools/call", {"name": "memory_list_recent", "arguments": {"domain": "odd"}})
    text = page["result"]["content"][0]["text"]
    assert "lone \ufffd here" in text and "bad \ufffd\ufffd bytes" in text


def test_a_line_over_four_mebibytes_is_refused_whole_and_the_next_line_is_read(raw: Raw) -> None:
    raw.send('{"jsonrpc":"2.0","id":30,"method":"ping","params":{"x":"' + "x" * (4 * 1024 * 1024) + '"}}')
    error = raw.unidentified_answer()
    assert error["error"]["code"] == -32700 and "longer than" in error["error"]["message"]
    assert raw.request("ping")["result"] == {}
    assert 30 not in raw.by_id


# -- ping and cancellation while a call waits on the backend -------------------------------------------


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    home = tmp_path_factory.mktemp("serve-home")
    key = subprocess.run(
        [MNEMO, "keys", "create", "alice"], env={"MNEMO_HOME": str(home)}, capture_output=True, text=True, check=True
    ).stdout.strip()
    served = start_serve(home)
    yield served.url, key
    served.stop()


@pytest.fixture
def held(endpoint: tuple[str, str], tmp_path: Path) -> Iterator[tuple[Raw, HoldingProxy]]:
    url, key = endpoint
    parts = urlsplit(url)
    proxy = HoldingProxy((parts.hostname or "127.0.0.1", parts.port or 80))
    through = url.replace(f":{parts.port}", f":{proxy.port}", 1)
    server = Raw(tmp_path, "--endpoint", through, env={"MNEMO_API_KEY": key, "MNEMO_DEADLINE": "600"})
    try:
        yield server.initialize(), proxy
    finally:
        proxy.close()
        server.close()


def test_ping_is_answered_while_a_call_waits_and_a_cancelled_write_sends_no_result_but_is_reported(
    held: tuple[Raw, HoldingProxy],
) -> None:
    raw, proxy = held
    proxy.passing.clear()
    raw.send(call(40, "memory_write", content="written, then cancelled", domain="cancelled"))
    proxy.wait_for_request(b"/memory/write")  # the write is at the server; its answer is held
    assert raw.request("ping")["result"] == {}  # answered while the call waits
    raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 40, "reason": "test"}})
    assert raw.request("ping")["result"] == {}  # the cancel has been read
    proxy.passing.set()
    page = raw.request("tools/call", {"name": "memory_list_recent", "arguments": {"domain": "cancelled"}})
    # calls run one at a time: this read ran after the cancelled write had its answer, and shows the write
    assert "written, then cancelled" in page["result"]["content"][0]["text"]
    assert 40 not in raw.by_id  # a cancelled request gets no response
    said = raw.wait_stderr("was cancelled after it took effect")
    assert "memory_write (request 40) was cancelled after it took effect, so its result was not sent: Stored" in said


def test_a_cancelled_read_sends_no_result_and_reports_nothing(held: tuple[Raw, HoldingProxy]) -> None:
    raw, proxy = held
    proxy.passing.clear()
    raw.send(call(50, "memory_stats"))
    proxy.wait_for_request(b"/memory/stats")
    raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 50}})
    assert raw.request("ping")["result"] == {}
    proxy.passing.set()
    assert "result" in raw.request("tools/call", {"name": "memory_list_rooms", "arguments": {}})
    assert 50 not in raw.by_id
    assert "cancelled" not in "".join(raw.stderr)


def test_stdin_closed_while_a_call_waits_the_call_is_answered_then_exit_0(held: tuple[Raw, HoldingProxy]) -> None:
    raw, proxy = held
    proxy.passing.clear()
    raw.send(call(60, "memory_list_recent", domain="stdin-closed"))
    proxy.wait_for_request(b"/memory/recent")
    assert raw.proc.stdin is not None
    raw.proc.stdin.close()
    proxy.passing.set()
    assert raw.answer(60)["result"]["content"][0]["text"] == "No memories in the domain stdin-closed yet."
    assert raw.close() == 0


# -- a fuzz of lines --------------------------------------------------------------------------------

METHODS = ["ping", "tools/list", "tools/call", "prompts/list", "prompts/get", "resources/read", "no/such", "initialize"]
TOOLS = ["memory_write", "memory_read", "memory_list_recent", "memory_feedback", "memory_stats", "vault_list", "x"]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
ARGUMENTS = st.dictionaries(
    st.sampled_from(["content", "query", "domain", "limit", "cursor", "atom_ids", "outcome", "top_k"]), JSON, max_size=4
)


@st.composite
def lines(draw: st.DrawFn) -> tuple[bytes, object]:
    """One line and what it is owed: a fresh id (an answer under it), "null" (one answer with id null) or None."""
    kind = draw(st.sampled_from(["request", "broken request", "not json", "nan", "odd id", "notification"]))
    request_id = next(IDS)
    method = draw(st.sampled_from(METHODS))
    params: Any = (
        draw(JSON) if method != "tools/call" else {"name": draw(st.sampled_from(TOOLS)), "arguments": draw(ARGUMENTS)}
    )
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    if kind == "request":
        if not isinstance(params, dict):
            message.pop("params")
        return json.dumps(message).encode(), request_id
    if kind == "broken request":
        broken = draw(st.sampled_from(["jsonrpc", "method", "params"]))
        message[broken] = {"jsonrpc": "1.0", "method": 42, "params": "text"}[broken]
        return json.dumps(message).encode(), request_id
    if kind == "not json":
        text = draw(st.text(st.characters(blacklist_characters="\r\n"), min_size=1, max_size=40))
        try:
            json.loads(text)
        except ValueError:
            return (text.encode("utf-8", "surrogatepass") if text.strip() else b"{"), "null"
        return b"{" + text.encode("utf-8", "surrogatepass"), "null"
    if kind == "nan":
        return json.dumps({**message, "params": {"x": float("nan")}}).encode(), "null"
    if kind == "odd id":
        return json.dumps({**message, "id": draw(st.sampled_from([1.5, True, None, [1], {"a": 1}]))}).encode(), "null"
    message.pop("id")
    if not isinstance(params, dict):
        message.pop("params")  # a notification with valid params is owed nothing; with invalid ones, id null
    return json.dumps(message).encode(), None


@given(st.lists(lines(), min_size=1, max_size=8))
def test_every_line_with_an_id_is_answered_and_the_server_stays_up(
    fuzzed: Raw, batch: list[tuple[bytes, object]]
) -> None:
    nulls_before = len(fuzzed.unidentified)
    for line, _ in batch:
        fuzzed.send(line)
    for _, owed in batch:
        if owed not in (None, "null"):
            answer = fuzzed.answer(owed)
            assert ("result" in answer) != ("error" in answer)
    owed_nulls = sum(1 for _, owed in batch if owed == "null")
    while len(fuzzed.unidentified) < nulls_before + owed_nulls:
        fuzzed._next()
    assert all(m["error"]["code"] in (-32700, -32600) for m in fuzzed.unidentified[nulls_before:])
    assert fuzzed.request("ping")["result"] == {}
    assert all(len(answers) == 1 for answers in fuzzed.by_id.values())  # never two answers for one id


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Raw]:
    home = tmp_path_factory.mktemp("fuzz")
    server = Raw(home, "--store", str(home / "store.db")).initialize()
    yield server
    assert server.close() == 0
